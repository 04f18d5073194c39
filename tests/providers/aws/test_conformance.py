"""The conformance kit against the AWS provider, launching through CreateFleet on moto."""

from __future__ import annotations

import pytest
from karpy_aws import AWSCloudProvider
from karpy_aws.apis import labels as aws

from karpy.cloudprovider.testing import CORE_WELL_KNOWN_LABELS, CloudProviderConformance


class TestAWSConformance(CloudProviderConformance):
    timeout = 30.0
    well_known_labels = CORE_WELL_KNOWN_LABELS | {
        aws.LABEL_INSTANCE_FAMILY,
        aws.LABEL_INSTANCE_CPU,
        aws.LABEL_INSTANCE_MEMORY,
    }

    @pytest.fixture
    def provider(self, aws_provider: AWSCloudProvider) -> AWSCloudProvider:
        return aws_provider
