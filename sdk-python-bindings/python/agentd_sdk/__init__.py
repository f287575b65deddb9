"""agentd SDK: make a Python function callable by capability through an
agentd router, and call capabilities served by others.

Serve::

    from agentd_sdk import Agent

    agent = Agent(router="auto", tenant="lab", agent_id="echo")

    @agent.capability("demo.echo", version=1, idempotent=True)
    def echo(payload):
        return {"echo": payload}

    agent.run()

Call::

    from agentd_sdk import Client

    client = Client(router="auto", tenant="lab", agent_id="caller")
    client.invoke("demo.echo", {"text": "hi"})
    for event in client.stream("demo.count", {"to": 3}):
        print(event.id, event.data)

Call one agent at its own public IPv6 address (``public_ipv6=True``)::

    from agentd_sdk import DirectAgent

    agent = DirectAgent.from_lease(handle.leases()[0], ca_file="agentd-ca.pem")
    agent.invoke("demo.echo", {"text": "hi"}, tenant="lab", source_agent="agent://lab/caller")

Router discovery: an explicit URL, then ``AGENTD_ROUTER_URL``, then the
IPv4 default gateway on port 7446. Auth: ``token=`` or ``AGENTD_TOKEN``
(bearer), else the router's trusted-LAN bootstrap when offered.
"""

from .agent import Agent, AgentHandle, Capability, Context, Event
from .client import Client, Stream, StreamEvent, Task
from .direct import DirectAgent
from .errors import (
    AgentdError,
    AuthError,
    BadRequestError,
    ConflictError,
    DeadlineExceededError,
    DeliveryError,
    ForbiddenError,
    HandlerError,
    NoRouteError,
    NotFoundError,
    PayloadTooLargeError,
    ProtocolError,
    RateLimitedError,
    RouterUnavailableError,
    StreamError,
    TaskCancelledError,
    TaskFailedError,
    TaskResultReleasedError,
    UnavailableError,
)

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentHandle",
    "AgentdError",
    "AuthError",
    "BadRequestError",
    "Capability",
    "Client",
    "ConflictError",
    "Context",
    "DeadlineExceededError",
    "DeliveryError",
    "DirectAgent",
    "Event",
    "ForbiddenError",
    "HandlerError",
    "NoRouteError",
    "NotFoundError",
    "PayloadTooLargeError",
    "ProtocolError",
    "RateLimitedError",
    "RouterUnavailableError",
    "Stream",
    "StreamError",
    "StreamEvent",
    "Task",
    "TaskCancelledError",
    "TaskFailedError",
    "TaskResultReleasedError",
    "UnavailableError",
]
