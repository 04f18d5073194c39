"""Reading EC2NodeClasses: the getter the provider takes, and the one over karpy's
Kubernetes client the factory gives it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from karpy.runtime import Client, thaw
from karpy.runtime import errors as kerrors
from karpy_aws._kinds import EC2_NODE_CLASS
from karpy_aws.apis.ec2nodeclass import EC2NodeClass

__all__ = ["NodeClassGetter", "node_classes_from"]

NodeClassGetter = Callable[[str], Awaitable[EC2NodeClass | None]]
"""``get(name)`` -> the EC2NodeClass of that name, or None if there is none."""


def node_classes_from(client: Client) -> NodeClassGetter:
    """A NodeClassGetter reading EC2NodeClasses through ``client``."""

    async def get(name: str) -> EC2NodeClass | None:
        try:
            found = await client.get(EC2_NODE_CLASS, name)
        except kerrors.NotFound:
            return None
        return EC2NodeClass.model_validate(thaw(found))

    return get
