"""The kill harness on S3: operations SIGKILLed at sampled storage mutations (each a PUT,
conditional PUT or DELETE), then retried; our reader and hudi-rs (over S3) see only a state
before or after the operation, and after the retry exactly the state after it."""

from __future__ import annotations

from tests.reliability.harness import run


def test_kill_harness_on_s3(s3_bucket, s3_options):
    operations = ["upsert_mor", "compaction_execute", "clean"]
    report = run(operations, size=1, commits=4, points=3, workdir=f"s3://{s3_bucket}/kill",
                 storage_options=s3_options)
    print(report.line())
    assert report.kills >= 3 * len(operations) and report.recoveries == report.kills
    assert not report.mismatches, report.mismatches
