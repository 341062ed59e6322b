#!/usr/bin/env python3
"""The reference MSK IAM presigned URL of src/sink/oauth/msk_iam.rs's known-answer test.

AWS's Python signer for MSK IAM (aws-msk-iam-sasl-signer-python, `generate_auth_token`)
signs with botocore's `SigV4QueryAuth`: service `kafka-cluster`, `X-Amz-Expires` 900, a
`GET` of `https://kafka.<region>.amazonaws.com/?Action=kafka-cluster:Connect`. This runs
the same botocore code with fixed credentials and a fixed clock and prints the signed URL
(before the signer's unsigned `User-Agent` parameter). Run it with botocore installed
(`pip install botocore`); it sends nothing anywhere.
"""
import datetime
from unittest import mock

import botocore.auth
from botocore.auth import SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

FIXED = datetime.datetime(2024, 5, 1, 12, 34, 56)  # UTC, no tzinfo, as botocore uses it

credentials = Credentials(
    "AKIDEXAMPLE",
    "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
    "FQoGZXIvYXdzEXAMPLE/session+token==",
)
with mock.patch.object(botocore.auth, "get_current_datetime", return_value=FIXED):
    request = AWSRequest(
        method="GET",
        url="https://kafka.us-west-2.amazonaws.com/",
        params={"Action": "kafka-cluster:Connect"},
    )
    SigV4QueryAuth(credentials, "kafka-cluster", "us-west-2", expires=900).add_auth(request)
    print(request.prepare().url)
