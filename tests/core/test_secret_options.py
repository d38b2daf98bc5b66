"""Hostile storage options: whatever mix of aliases, contradictions and bad values a caller
gives, parsing them raises only `LakeError`s, and no message carries the value of an option
`is_secret_option` names a secret (issue 23, item 3); the core's own lane, no server."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_lake.core.errors import LakeError
from airflow_lake.core.objectstore import _GCS_KEYS, _S3_KEYS, gcs_options, is_secret_option, s3_filesystem, s3_settings

# Hudi's own credentials, given where storage options go: refused by name, never by value
HUDI_SECRETS = ["hoodie.aws.access.key", "hoodie.aws.secret.key", "hoodie.aws.session.token",
                "hoodie.metrics.datadog.api.key", "hoodie.datasource.hive_sync.password"]
VALUES = st.one_of(st.sampled_from(["true", "false", "maybe", "http://x:1", "ftp://x", "etag", "none", ""]),
                   st.text("abc=:/ %\n", max_size=5), st.integers(-1, 3), st.booleans(), st.none())


def marked(given_options: dict) -> dict:
    """Secret options get a value of their own (`SeCrEt<n>Z`), found in a message only if printed."""
    return {k: f"SeCrEt{n}Z" if is_secret_option(k) else v for n, (k, v) in enumerate(given_options.items())}


def options(keys: dict[str, str]) -> st.SearchStrategy:
    names = st.sampled_from(sorted(keys) + [k.upper() for k in sorted(keys)][:10] + ["unknown_key", "my_password"]
                            + HUDI_SECRETS)
    return st.dictionaries(names, VALUES, max_size=6).map(marked)


@settings(max_examples=300, deadline=None)
@given(s3=options(_S3_KEYS), gcs=options(_GCS_KEYS))
def test_no_error_about_options_shows_a_secret(s3, gcs):
    for given_options, parse in ((s3, lambda o: s3_filesystem("s3://b/t", s3_settings("s3://b/t", o))),
                                 (gcs, lambda o: gcs_options("gs://b/t", o))):
        try:
            parse(given_options)
        except LakeError as e:
            secrets = [v for k, v in given_options.items() if is_secret_option(k)]
            assert not any(v in str(e) for v in secrets), (given_options, str(e))


def test_the_values_that_carry_options_show_no_secret_in_their_repr(tmp_path):
    from airflow_lake.core import Table
    from airflow_lake.core.context import TableContext

    secret = "SeCrEt-in-a-repr"
    settings_ = s3_settings("s3://b/t", {"aws_access_key_id": "k", "aws_secret_access_key": secret})
    table = Table.create(str(tmp_path / "t"), name="t", record_key="id")
    context = TableContext(table.storage.uri, {}, {"hoodie.aws.secret.key": secret}, {"secret_key": secret})
    assert secret not in repr(settings_) and secret not in repr(context)
