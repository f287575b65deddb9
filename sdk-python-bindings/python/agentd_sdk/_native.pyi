"""Type stubs for the native half of agentd_sdk (Rust, PyO3)."""

from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple, Union

Reply = Tuple[int, List[Tuple[str, str]], bytes]
StreamItem = Tuple[str, Optional[str], str]

class CallError(Exception):
    """args: (kind: "transport" | "timeout" | "status" | "decode", status: int,
    code: str, message: str, not_delivered: bool, outcome: Optional[str],
    reason: Optional[str])"""

class StreamError(Exception): ...

def resolve_router(router: str) -> Tuple[str, str]:
    """"auto" or a URL -> (the router base URL, where it came from:
    "explicit", "environment", "dns-sd" or "default-gateway"); in that
    order: a URL, AGENTD_ROUTER_URL, a bounded _agentd._tcp browse, the
    IPv4 default gateway :7446. Raises ValueError."""

def check_advertise(host: str, allow_loopback: bool) -> str:
    """Canonical advertise host; ValueError for loopback (unless allowed),
    unspecified, multicast or malformed hosts."""

def endpoint_url(host: str, port: int, path: str) -> str: ...

class CancelHandle:
    """Fires when the caller of a sync or stream invocation hangs up."""

    @property
    def cancelled(self) -> bool: ...
    def on_cancel(self, callback: Callable[[], Any]) -> None: ...

class Server:
    """The served handler endpoint (HTTP/1.1, one thread per connection)."""

    def __init__(
        self,
        host: str,
        port: int,
        path: str,
        on_invoke: Callable[[str, bytes, Dict[str, str], CancelHandle], Union[Reply, Iterator[StreamItem]]],
        on_task: Callable[[str, str, str, Dict[str, str], bytes], Reply],
        max_body: int = 1048576,
        max_connections: int = 64,
    ) -> None: ...
    @property
    def port(self) -> int: ...
    @property
    def host(self) -> str: ...
    def active(self) -> int: ...
    def close(self, grace: float = 2.0) -> None: ...

class RouterClient:
    def __init__(
        self,
        url: str,
        token: Optional[str] = None,
        tenant: str = "default",
        origin: str = "",
        discover_auth: bool = True,
        timeout: float = 10.0,
    ) -> None: ...
    @property
    def url(self) -> str: ...
    @property
    def auth_mode(self) -> str: ...
    def request(
        self,
        method: str,
        target: str,
        body: Optional[bytes] = None,
        headers: List[Tuple[str, str]] = ...,
        timeout: float = 10.0,
    ) -> Tuple[int, List[Tuple[str, str]], bytes]: ...

class LeaseKeeper:
    def __init__(self, client: RouterClient, registrations: List[Tuple[bytes, int]], timeout: float = 10.0) -> None: ...
    def status(self) -> List[Dict[str, Any]]: ...
    def close(self) -> List[str]: ...

class EventStream:
    def __init__(
        self,
        client: RouterClient,
        envelope: bytes,
        start_after: int = 0,
        max_reconnects: int = 5,
        timeout: float = 10.0,
        read_timeout: Optional[float] = None,
    ) -> None: ...
    def __iter__(self) -> "EventStream": ...
    def __next__(self) -> Tuple[Optional[int], Optional[str], str]: ...
    @property
    def cursor(self) -> int: ...
    @property
    def reconnects(self) -> int: ...
    @property
    def task_id(self) -> Optional[str]: ...
