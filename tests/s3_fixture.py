"""An S3-compatible server on loopback (moto's server mode) for the reply store on object storage.

Used through s3fs exactly as a user's bucket is: ``AWS_ENDPOINT_URL`` points the standard AWS
configuration at it, with dummy credentials.
"""

from __future__ import annotations

import logging
import os
import uuid

import pytest


class S3Server:
    """moto's S3 in a thread of this process, on a free loopback port."""

    scheme = "s3"

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        host, port = self.server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"

    @property
    def env(self) -> dict[str, str]:
        """What a process needs to reach it: the endpoint and dummy credentials."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    @property
    def options(self) -> dict:
        """The same as ``storage_options`` (for a process whose environment does not point at it)."""
        return {"key": "testing", "secret": "testing", "client_kwargs": {"endpoint_url": self.endpoint}}

    @property
    def cli_options(self) -> list[str]:
        """``--storage-option`` values beside the environment's credentials."""
        return [f"client_kwargs.endpoint_url={self.endpoint}"]

    def bucket(self) -> str:
        """A new empty bucket's URL."""
        import s3fs

        name = f"b-{uuid.uuid4().hex[:10]}"
        s3fs.S3FileSystem(client_kwargs={"endpoint_url": self.endpoint}, key="testing", secret="testing").mkdir(name)
        return f"s3://{name}"

    def refuse_writes(self, url: str, refuse: bool = True) -> None:
        """Make the bucket of ``url`` refuse every object put (a bucket policy that denies s3:PutObject, as a
        read-only grant does), reads still allowed; ``refuse=False``: writable again."""
        import json

        import boto3

        bucket = url.split("://", 1)[1].split("/", 1)[0]
        client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        )
        if not refuse:
            client.delete_bucket_policy(Bucket=bucket)
            return
        deny = {"Effect": "Deny", "Principal": "*", "Action": "s3:PutObject", "Resource": f"arn:aws:s3:::{bucket}/*"}
        client.put_bucket_policy(Bucket=bucket, Policy=json.dumps({"Version": "2012-10-17", "Statement": [deny]}))

    def stop(self) -> None:
        self.server.stop()


@pytest.fixture(scope="session")
def s3_server():
    server = S3Server()
    yield server
    server.stop()


@pytest.fixture
def s3(s3_server, monkeypatch):
    """The server, with this process's AWS configuration pointed at it."""
    for k, v in s3_server.env.items():
        monkeypatch.setenv(k, v)
    for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(k, raising=False)
    yield s3_server


def subprocess_env(server: S3Server, local_dir, **extra: str) -> dict[str, str]:
    """The environment of a run in its own process: the server's, and its own local cache folder."""
    env = {**os.environ, **server.env, "HF_JUDGE_LOCAL_CACHE": str(local_dir), **extra}
    env.pop("AWS_PROFILE", None)
    return env
