"""``LaunchTemplateData.CpuOptions`` from ``spec.cpuOptions``, as Karpenter AWS v1.14.1
renders it (pkg/providers/launchtemplate ``cpuOptions``): only ``NestedVirtualization``,
and no ``CpuOptions`` at all when the class does not set it.

The EC2 API member ``NestedVirtualization`` is newer than some AWS SDKs karpy may run
with; an SDK whose EC2 model lacks it would refuse the request ("Unknown parameter") at
every launch. Asking the client's own service model first turns that into one clear
error naming the field, before any API call, instead of a launch that drops the setting.
"""

from __future__ import annotations

from typing import Any

from karpy.cloudprovider import NodeClassNotReadyError
from karpy_aws.apis.ec2nodeclass import EC2NodeClass

__all__ = ["cpu_options"]


def _sdk_members(ec2_client: Any) -> set[str]:
    shape = ec2_client.meta.service_model.shape_for("LaunchTemplateCpuOptionsRequest")
    return set(shape.members)


def cpu_options(node_class: EC2NodeClass, ec2_client: Any) -> dict[str, Any] | None:
    """The template's ``CpuOptions`` for ``node_class``, or None when it sets none;
    NodeClassNotReadyError when the installed SDK cannot send it."""
    options = node_class.spec.cpu_options
    if options is None or options.nested_virtualization is None:
        return None
    if "NestedVirtualization" not in _sdk_members(ec2_client):
        raise NodeClassNotReadyError(
            f"EC2NodeClass {node_class.metadata.name!r}: spec.cpuOptions.nestedVirtualization "
            "is not supported by the installed AWS SDK (botocore has no "
            "CpuOptions.NestedVirtualization); upgrade aioboto3/botocore"
        )
    return {"NestedVirtualization": options.nested_virtualization}
