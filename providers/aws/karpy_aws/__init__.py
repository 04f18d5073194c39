"""The AWS cloud provider for karpy (EC2 through aioboto3) and the
``karpenter.k8s.aws/v1`` EC2NodeClass model."""
