"""Object-store settings: `storage_options` (delta-rs / object_store style keys, or pyarrow's
own keywords) turned into a `pyarrow.fs` file system, and the conditional PUT that pyarrow
lacks (`If-None-Match: *`, through boto3) for S3's create-if-absent.

Credentials, region and endpoint only ever come from the options (or the environment and
profiles the SDKs read themselves), never from code.
"""

from __future__ import annotations

import errno
import functools
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pyarrow.fs as pafs

from .errors import InvalidOptionError
from .vocabulary import is_table_option

# option name (lower case) -> pyarrow S3FileSystem keyword; delta-rs / object_store names,
# the AWS SDKs' names and pyarrow's own
_S3_KEYS = {
    "aws_access_key_id": "access_key", "access_key_id": "access_key", "access_key": "access_key",
    "aws_secret_access_key": "secret_key", "secret_access_key": "secret_key", "secret_key": "secret_key",
    "aws_session_token": "session_token", "session_token": "session_token", "aws_token": "session_token",
    "token": "session_token",
    "aws_region": "region", "region": "region", "region_name": "region", "aws_default_region": "region",
    "aws_endpoint_url": "endpoint", "aws_endpoint": "endpoint", "endpoint_url": "endpoint",
    "endpoint": "endpoint", "endpoint_override": "endpoint",
    "aws_allow_http": "allow_http", "allow_http": "allow_http",
    "scheme": "scheme",
    "aws_virtual_hosted_style_request": "force_virtual_addressing",
    "virtual_hosted_style_request": "force_virtual_addressing",
    "force_virtual_addressing": "force_virtual_addressing",
    "aws_skip_signature": "anonymous", "skip_signature": "anonymous", "anonymous": "anonymous",
    "aws_conditional_put": "conditional_put", "conditional_put": "conditional_put",
    "aws_role_arn": "role_arn", "role_arn": "role_arn",
    "aws_role_session_name": "session_name", "session_name": "session_name",
    "external_id": "external_id",
    "request_timeout": "request_timeout", "connect_timeout": "connect_timeout",
    "allow_bucket_creation": "allow_bucket_creation", "allow_bucket_deletion": "allow_bucket_deletion",
    "tls_ca_file_path": "tls_ca_file_path", "aws_ca_bundle": "tls_ca_file_path",
    "proxy_options": "proxy_options", "load_frequency": "load_frequency",
    "background_writes": "background_writes", "default_metadata": "default_metadata",
    "allow_delayed_open": "allow_delayed_open",
}
_S3_BOOLS = ("allow_http", "force_virtual_addressing", "anonymous", "allow_bucket_creation",
             "allow_bucket_deletion", "background_writes", "allow_delayed_open")
# values of `conditional_put`: the store honours `If-None-Match: *` (AWS S3 since 2024, MinIO,
# moto...) or it does not (then create-if-absent is a check and a PUT: one writer only)
CONDITIONAL_ON = ("etag", "true", "if-none-match", "enabled")
CONDITIONAL_OFF = ("none", "false", "disabled", "off")

_GCS_KEYS = {
    "google_endpoint_url": "endpoint", "gcs_endpoint_url": "endpoint", "endpoint_url": "endpoint",
    "endpoint": "endpoint", "endpoint_override": "endpoint",
    "allow_http": "allow_http", "google_allow_http": "allow_http", "scheme": "scheme",
    "anonymous": "anonymous", "google_skip_signature": "anonymous", "skip_signature": "anonymous",
    "access_token": "access_token", "google_access_token": "access_token",
    "credential_token_expiration": "credential_token_expiration",
    "target_service_account": "target_service_account", "project_id": "project_id",
    "google_project_id": "project_id", "default_bucket_location": "default_bucket_location",
    "retry_time_limit": "retry_time_limit", "default_metadata": "default_metadata",
}


# canonical settings that are credentials, and words that make any other option name one
_SECRET_SETTINGS = ("access_key", "secret_key", "session_token", "access_token", "external_id")
_SECRET_WORDS = ("secret", "token", "password", "passwd", "credential", "sas", "service_account",
                 "private", "auth")
# Apache Hudi's own options holding a credential, or text that may embed one (a JDBC URL with
# a password, HTTP headers with a bearer token), that the words alone would not name
HUDI_SECRET_OPTIONS = frozenset({
    "hoodie.aws.access.key", "hoodie.aws.secret.key", "hoodie.aws.session.token",
    "hoodie.metrics.datadog.api.key", "hoodie.write.commit.callback.http.api.key",
    "hoodie.write.commit.callback.http.custom.headers",
    "hoodie.datasource.hive_sync.password", "hoodie.datasource.hive_sync.jdbcurl",
})
# in a hoodie.* key "key" alone names record keys, key generators, partition keys: a key is a
# credential there only as an API, access, secret or private key (`api.key`, `api_key`, `apikey`)
_HUDI_SECRET_KEY = re.compile(r"(?:^|[._-])(?:api|access|secret|private|account|auth)[._-]?key(?:$|[._-])")
SECRET_SHOWN = "<secret>"


def is_secret_option(key: str) -> bool:
    """Whether option `key` holds a credential whose value must never reach a command line,
    log, error message or XCom: S3/GCS access and secret keys, session and access tokens
    (under any alias), any option naming a key, secret, token, password or credential, and
    Hudi's credentials (`HUDI_SECRET_OPTIONS`; in other `hoodie.*` keys "key" counts only as
    an API, access, secret or private key, since record and partition keys are no secrets)."""
    name = str(key).lower()
    if name in HUDI_SECRET_OPTIONS or any(names_setting(name, setting) for setting in _SECRET_SETTINGS):
        return True
    if is_table_option(name):
        return _HUDI_SECRET_KEY.search(name) is not None or any(word in name for word in _SECRET_WORDS)
    return any(word in name for word in (*_SECRET_WORDS, "key"))


def shown(key: str, value: Any) -> str:
    """`key=value` for messages, the value replaced when the option is a secret."""
    return f"{key}={SECRET_SHOWN if is_secret_option(key) else repr(value)}"


def split_secrets(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(options that may appear on a command line, secret options)."""
    public = {k: v for k, v in options.items() if not is_secret_option(k)}
    return public, {k: v for k, v in options.items() if is_secret_option(k)}


def names_setting(key: str, setting: str) -> bool:
    """Whether the storage option `key` is a name of the S3/GCS `setting` (e.g. `access_key`)."""
    return setting in (_S3_KEYS.get(key.lower()), _GCS_KEYS.get(key.lower()))


@dataclass(frozen=True)
class S3Settings:
    """Normalised S3 options: pyarrow's keywords plus what the conditional PUT client needs."""

    pyarrow: dict[str, Any] = field(repr=False)  # (credentials)
    endpoint_url: str | None  # with its scheme, for boto3
    conditional_put: bool


def _flag(uri: str, key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off", ""):
        return False
    raise InvalidOptionError(f"table {uri}: storage option {shown(key, value)} is not a boolean")


def _same(name: str, a: Any, b: Any) -> bool:
    """Whether two values given for one setting under two names are one value: flags by their
    truth (`true` and True), endpoints without a trailing slash."""
    if name in _S3_BOOLS or name in ("allow_http", "anonymous"):
        try:
            return _flag("", name, a) == _flag("", name, b)
        except InvalidOptionError:
            return False
    if name == "endpoint" and isinstance(a, str) and isinstance(b, str):
        return a.rstrip("/") == b.rstrip("/")
    return a == b


def _normalise(uri: str, options: dict[str, Any], keys: dict[str, str], store: str,
               given: dict[str, str]) -> dict[str, Any]:
    """The options under their canonical names; `given` maps each name to the key the user wrote."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        name = keys.get(str(key).lower())
        if name is None:
            known = ", ".join(sorted({k for k in keys if k.startswith(("aws_", "google_"))} or set(keys)))
            raise InvalidOptionError(f"table {uri}: unknown {store} storage option {key!r} (known: {known})")
        if name in out and not _same(name, out[name], value):
            other = SECRET_SHOWN if is_secret_option(key) else repr(out[name])
            raise InvalidOptionError(f"table {uri}: storage option {shown(key, value)} contradicts "
                                     f"{given[name]} ({other}), another name for {name}")
        out[name] = value
        given[name] = str(key)
    return out


def _split_endpoint(uri: str, endpoint: str | None, allow_http: bool | None,
                    scheme: str | None) -> tuple[str | None, str | None]:
    """(host[:port] for pyarrow, scheme) of an endpoint given with or without its scheme."""
    for name, value in (("endpoint", endpoint), ("scheme", scheme)):
        if value is not None and not isinstance(value, str):
            raise InvalidOptionError(f"table {uri}: storage option {name}={value!r} is not a string")
    if not endpoint:
        return None, scheme or ("http" if allow_http else None)
    if "://" in endpoint:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https"):
            raise InvalidOptionError(f"table {uri}: endpoint {endpoint!r} must be http:// or https://")
        if parts.scheme == "http" and allow_http is False:
            raise InvalidOptionError(f"table {uri}: endpoint {endpoint!r} is plain http but allow_http is false")
        return parts.netloc + parts.path.rstrip("/"), parts.scheme
    return endpoint.rstrip("/"), scheme or ("http" if allow_http else "https")


def s3_settings(uri: str, options: dict[str, Any]) -> S3Settings:
    """S3 storage options -> pyarrow `S3FileSystem` keywords (aliases accepted, case-insensitive)."""
    given: dict[str, str] = {}
    opts = _normalise(uri, options, _S3_KEYS, "S3", given)
    for key in _S3_BOOLS:
        if key in opts:
            opts[key] = _flag(uri, given[key], opts[key])
    # a file written whole is then one PUT (pyarrow starts a multipart upload, three requests,
    # only once a part is full); a failure shows at close, inside the same `Storage` call
    opts.setdefault("allow_delayed_open", True)
    conditional = str(opts.pop("conditional_put", "etag")).strip().lower()
    if conditional not in CONDITIONAL_ON + CONDITIONAL_OFF:
        raise InvalidOptionError(f"table {uri}: storage option {given['conditional_put']}={conditional!r} is not "
                                 f"one of {CONDITIONAL_ON + CONDITIONAL_OFF}")
    host, scheme = _split_endpoint(uri, opts.pop("endpoint", None), opts.pop("allow_http", None),
                                   opts.pop("scheme", None))
    if host:
        opts["endpoint_override"] = host
    if scheme:
        opts["scheme"] = scheme
    endpoint_url = f"{scheme or 'https'}://{host}" if host else None
    return S3Settings(opts, endpoint_url, conditional in CONDITIONAL_ON)


def gcs_options(uri: str, options: dict[str, Any]) -> dict[str, Any]:
    """GCS storage options -> pyarrow `GcsFileSystem` keywords."""
    given: dict[str, str] = {}
    opts = _normalise(uri, options, _GCS_KEYS, "GCS", given)
    if "anonymous" in opts:
        opts["anonymous"] = _flag(uri, given["anonymous"], opts["anonymous"])
    allow_http = _flag(uri, given["allow_http"], opts.pop("allow_http")) if "allow_http" in opts else None
    host, scheme = _split_endpoint(uri, opts.pop("endpoint", None), allow_http, opts.pop("scheme", None))
    if host:
        opts["endpoint_override"] = host
    if scheme:
        opts["scheme"] = scheme
    return opts


def s3_filesystem(uri: str, settings: S3Settings) -> pafs.S3FileSystem:
    try:
        return pafs.S3FileSystem(**settings.pyarrow)
    except (TypeError, ValueError) as e:
        raise InvalidOptionError(f"table {uri}: bad S3 storage options: "
                                 f"{scrub(str(e), settings.pyarrow)}") from None


def scrub(text: str, options: dict[str, Any]) -> str:
    """`text` with the value of every secret option among `options` replaced."""
    for key, value in options.items():
        if is_secret_option(key) and value not in (None, "") and len(str(value)) >= 3:
            text = text.replace(str(value), SECRET_SHOWN)
    return text


class ConditionalPut:
    """Create-if-absent on S3: one `PUT` with `If-None-Match: *` (HTTP 412 when the key
    exists). pyarrow's S3 file system cannot send that header; boto3 (the `s3` extra) does.
    The client is made on first use, from the same options as the file system."""

    def __init__(self, settings: S3Settings):
        self.settings = settings
        self._client = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"settings": self.settings}  # the client is made again where it is used

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["settings"])

    def client(self):
        with self._lock:
            if self._client is None:
                import boto3
                from botocore.config import Config

                p = self.settings.pyarrow
                kwargs: dict[str, Any] = {"region_name": p.get("region") or "us-east-1",
                                          "endpoint_url": self.settings.endpoint_url}
                if p.get("anonymous"):
                    from botocore import UNSIGNED

                    config = Config(signature_version=UNSIGNED)
                else:
                    config = Config()
                    kwargs.update(aws_access_key_id=p.get("access_key"), aws_secret_access_key=p.get("secret_key"),
                                  aws_session_token=p.get("session_token"))
                if p.get("force_virtual_addressing"):
                    config = config.merge(Config(s3={"addressing_style": "virtual"}))
                elif self.settings.endpoint_url:
                    config = config.merge(Config(s3={"addressing_style": "path"}))
                if p.get("tls_ca_file_path"):
                    kwargs["verify"] = p["tls_ca_file_path"]
                self._client = boto3.session.Session().client("s3", config=config, **kwargs)
            return self._client

    def version(self, bucket_key: str) -> tuple[str, int] | None:
        """(ETag, modification time in ms) of `bucket/key`, None when absent."""
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, _, key = bucket_key.partition("/")
        try:
            head = self.client().head_object(Bucket=bucket, Key=key)
        except ClientError as e:
            if e.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
                return None
            raise OSError(f"HEAD of s3://{bucket_key} failed: {e}") from e
        except BotoCoreError as e:  # no answer: connection refused or reset, timeouts
            raise ConnectionError(f"HEAD of s3://{bucket_key} failed: {e}") from e
        return head["ETag"], int(head["LastModified"].timestamp() * 1000)

    def put_if_match(self, bucket_key: str, data: bytes, etag: str) -> bool:
        """PUT `bucket/key` only if it is still the version `etag` (`If-Match`); False when it changed."""
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, _, key = bucket_key.partition("/")
        try:
            self.client().put_object(Bucket=bucket, Key=key, Body=data, IfMatch=etag)
            return True
        except ClientError as e:
            status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status in (404, 409, 412):  # gone, or replaced meanwhile: another taker won
                return False
            raise OSError(f"conditional PUT of s3://{bucket_key} failed: {e}") from e
        except BotoCoreError as e:  # (whether the PUT happened is unknown: the caller's to find out)
            raise OSError(f"conditional PUT of s3://{bucket_key} failed: {e}") from e

    # The same client also reads and deletes in one request each, where pyarrow's file system
    # takes two or three (`Storage.read`, `Storage.delete`).
    def get(self, bucket_key: str) -> bytes:
        """The whole object `bucket/key`: one GET (pyarrow's input streams first send a HEAD)."""
        bucket, _, key = bucket_key.partition("/")
        return self._call("GET", bucket_key, lambda: self.client().get_object(Bucket=bucket, Key=key)["Body"].read())

    def delete(self, bucket_key: str) -> None:
        """DELETE `bucket/key` (one request; a missing key is no error). pyarrow's `delete_file`
        first asks whether the key exists and then writes an empty `folder/` object in its place
        so that the folder lives on: three requests, and marker objects in the table's folders."""
        bucket, _, key = bucket_key.partition("/")
        self._call("DELETE", bucket_key, lambda: self.client().delete_object(Bucket=bucket, Key=key))

    @staticmethod
    def _call(what: str, bucket_key: str, call):
        """`call()` with boto3's failures as the `OSError`s `failure_kind` sorts: a missing
        key a `FileNotFoundError`, a network failure, throttling or a 5xx a `ConnectionError`."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return call()
        except ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            status = int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
            text = f"{what} of s3://{bucket_key} failed: {e}"
            if code in ("NoSuchKey", "404", "NotFound") or status == 404:
                raise FileNotFoundError(errno.ENOENT, text) from e
            if status >= 500 or code in ("SlowDown", "Throttling", "RequestTimeout"):
                raise ConnectionError(text) from e
            raise OSError(text) from e
        except BotoCoreError as e:  # no answer: connection refused or reset, timeouts
            raise ConnectionError(f"{what} of s3://{bucket_key} failed: {e}") from e

    def put_if_absent(self, bucket_key: str, data: bytes) -> bool:
        """PUT `bucket/key` unless it exists; False when it existed (or a racing PUT won)."""
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, _, key = bucket_key.partition("/")
        for attempt in range(8):
            try:
                self.client().put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
                return True
            except ClientError as e:
                code = str(e.response.get("Error", {}).get("Code", ""))
                status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
                if code == "PreconditionFailed" or status == 412:
                    return False
                if code == "ConditionalRequestConflict" or status == 409:
                    time.sleep(0.05 * (attempt + 1))  # a concurrent conditional PUT: ask again
                    continue
                raise OSError(f"conditional PUT of s3://{bucket_key} failed: {e}") from e
            except BotoCoreError as e:  # (whether the PUT happened is unknown: the caller's to find out)
                raise OSError(f"conditional PUT of s3://{bucket_key} failed: {e}") from e
        raise OSError(f"conditional PUT of s3://{bucket_key}: still conflicting after 8 attempts")


# what pyarrow's file systems write in an OSError's message, by kind of failure: S3 `AWS Error
# <CODE> during <Operation>`, GCS `google::cloud::Status(<CODE>: ...)`, curl's transport errors
_MISSING = ("AWS Error NO_SUCH_KEY", "AWS Error RESOURCE_NOT_FOUND", "AWS Error NO_SUCH_BUCKET", "NoSuchKey",
            "Status(NOT_FOUND", "NOT_FOUND:")
_TRANSIENT = re.compile(
    r"AWS Error (NETWORK_CONNECTION|SLOW_DOWN|SERVICE_UNAVAILABLE|INTERNAL_FAILURE|REQUEST_TIMEOUT|THROTTLING"
    r"|REQUEST_TIME_TOO_SKEWED)|HTTP (response code:?|status) 5\d\d|Status\((UNAVAILABLE|DEADLINE_EXCEEDED"
    r"|RESOURCE_EXHAUSTED|INTERNAL|ABORTED)|curlCode: (6|7|28|35|52|55|56)\b|Timeout was reached"
    r"|Connection (refused|reset)")


def failure_kind(error: OSError) -> str | None:
    """How a file system call failed: "missing" (the file is not there), "transient" (worth
    asking again: network, throttling, a 5xx) or None (anything else: denied, invalid...)."""
    if isinstance(error, FileNotFoundError):
        return "missing"
    if isinstance(error, (ConnectionError, TimeoutError)):
        return "transient"
    text = str(error)
    if any(marker in text for marker in _MISSING):
        return "missing"
    return "transient" if _TRANSIENT.search(text) else None


@functools.cache
def boto3_available() -> bool:
    try:
        import boto3  # noqa: F401
    except ImportError:
        return False
    return True
