"""The credentials of a request (docs/API.md#authentication): the key it presents (``Authorization: Bearer
<key>`` or ``X-API-Key: <key>``), and the 401 ``unauthorized`` when there is no valid one.
"""

from __future__ import annotations

from collections.abc import Iterable

from ipintel.errors import ApiError

MAX_KEY_BYTES = 1024  # a presented key longer than this is not one of ours: refused without hashing
MIN_KEY_BYTES = 32  # a presented key shorter than this is refused: keys are long random strings (make api-key: 43)
REALM = 'Bearer realm="ipintel"'


class Unauthorized(ApiError):
    """401 ``unauthorized``: the request presented no key, a malformed one, or one that is not in the file.
    Raised by :meth:`ApiKeys.authenticate` inside the request gate; the request middleware answers it before
    any token is spent."""

    def __init__(self, message: str, error: str | None = None) -> None:
        # RFC 6750 section 3: no error attribute when the request carried no credentials at all.
        challenge = REALM if error is None else f'{REALM}, error="{error}"'
        super().__init__("unauthorized", message, headers={"WWW-Authenticate": challenge})


_MESSAGES = {
    "missing": "this server requires an API key: send it as Authorization: Bearer <key> (or X-API-Key: <key>)",
    "malformed": "the Authorization header must be 'Bearer <key>' (or send the key as X-API-Key: <key>)",
    "invalid": "the API key is not valid: it is not one of this server's keys (mistyped or revoked)",
    "short": f"the API key is not valid: keys are at least {MIN_KEY_BYTES} characters (make api-key makes them)",
}
# The error attribute of the challenge (RFC 6750 section 3.1): none when no key was sent at all.
_CHALLENGE_ERRORS = {
    "missing": None,
    "malformed": "invalid_request",
    "invalid": "invalid_token",
    "short": "invalid_token",
}


def refusal(reason: str) -> Unauthorized:
    """The 401 of ``reason``: ``missing``, ``malformed`` or ``invalid``."""
    return Unauthorized(_MESSAGES[reason], _CHALLENGE_ERRORS[reason])


def presented_key(headers: Iterable[tuple[bytes, bytes]]) -> bytes | str:
    """The key a request presents: ``Authorization: Bearer <key>``, else ``X-API-Key: <key>``; else why there
    is none (``missing`` or ``malformed``). A Bearer key wins over X-API-Key."""
    authorization: bytes | None = None
    api_key: bytes | None = None
    for name, value in headers:
        if name == b"authorization" and authorization is None:
            authorization = value
        elif name == b"x-api-key" and api_key is None:
            api_key = value
    if authorization is not None:
        scheme, _, token = authorization.strip().partition(b" ")
        if scheme.lower() == b"bearer":
            token = token.strip()
            return token if token and b" " not in token else "malformed"
        if api_key is None:
            return "malformed"  # another scheme (Basic ...) and no X-API-Key
    if api_key is None:
        return "missing"
    api_key = api_key.strip()
    return api_key if api_key else "malformed"
