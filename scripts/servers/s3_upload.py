#!/usr/bin/env python3
"""Fill an S3 API server (moto on 127.0.0.1 in the tests) with boto3.

    s3_upload.py ENDPOINT mkbucket BUCKET
    s3_upload.py ENDPOINT upload BUCKET PREFIX DIR   every file under DIR, as PREFIX/relpath
    s3_upload.py ENDPOINT put BUCKET KEY FILE        one object (replacing the key's object)
    s3_upload.py ENDPOINT putx BUCKET KEY FILE       the same, KEY with Python escapes
                                                     (\\x00, \\x01: keys argv cannot carry)
    s3_upload.py ENDPOINT public BUCKET              a bucket policy letting anyone GET and list
    s3_upload.py ENDPOINT iamkey USER                an IAM user allowed s3:*, and an access key
                                                     of it: prints "KEY_ID SECRET"
    s3_upload.py ENDPOINT checksigs                  moto only: from now on every request must
                                                     be signed by a known access key

Credentials and region come from the usual AWS environment variables (moto
takes any). Runs with the servers venv (.venv-servers), which has boto3.
"""
import json
import os
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import boto3
from botocore.config import Config


def client(endpoint):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
        config=Config(max_pool_connections=16, retries={"max_attempts": 3}),
    )


def upload(s3, bucket, prefix, top):
    files = []
    for d, _, names in os.walk(top):
        for n in names:
            path = os.path.join(d, n)
            rel = os.path.relpath(path, top).replace(os.sep, "/")
            files.append((path, f"{prefix.strip('/')}/{rel}".lstrip("/")))
    # Concurrent: a prefix of 1,000 small containers uploads in seconds.
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda f: s3.upload_file(f[0], bucket, f[1]), files))
    print(f"uploaded {len(files)} objects to s3://{bucket}/{prefix}")


def public(s3, bucket):
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
             "Resource": f"arn:aws:s3:::{bucket}/*"},
            {"Effect": "Allow", "Principal": "*", "Action": "s3:ListBucket",
             "Resource": f"arn:aws:s3:::{bucket}"},
        ],
    }
    s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps(policy))


def iam_key(endpoint, user):
    iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1")
    iam.create_user(UserName=user)
    policy = {"Version": "2012-10-17",
              "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
    iam.put_user_policy(UserName=user, PolicyName="s3", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=user)["AccessKey"]
    print(key["AccessKeyId"], key["SecretAccessKey"])


def check_signatures(endpoint):
    # moto's own switch: after 0 more unchecked requests, check them all.
    req = urllib.request.Request(f"{endpoint}/moto-api/reset-auth", data=b"0", method="POST",
                                 headers={"Content-Type": "text/plain"})
    with urllib.request.urlopen(req) as r:
        r.read()


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    s3, cmd, args = client(argv[1]), argv[2], argv[3:]
    if cmd == "mkbucket" and len(args) == 1:
        s3.create_bucket(Bucket=args[0])
    elif cmd == "upload" and len(args) == 3:
        upload(s3, *args)
    elif cmd == "put" and len(args) == 3:
        s3.upload_file(args[2], args[0], args[1])
    elif cmd == "putx" and len(args) == 3:
        key = args[1].encode().decode("unicode_escape")
        with open(args[2], "rb") as f:
            s3.put_object(Bucket=args[0], Key=key, Body=f.read())
    elif cmd == "public" and len(args) == 1:
        public(s3, args[0])
    elif cmd == "iamkey" and len(args) == 1:
        iam_key(argv[1], args[0])
    elif cmd == "checksigs" and not args:
        check_signatures(argv[1])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
