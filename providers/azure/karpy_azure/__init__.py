"""The Azure cloud provider for karpy (azure-mgmt-compute, azure-identity) and the
``karpenter.azure.com/v1beta1`` AKSNodeClass model."""
