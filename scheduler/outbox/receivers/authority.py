"""Who the drainer is to a run-ledger receiver (OBX-6, OBX-8): the token it delivers with, and what it may batch.

- The launch's pre-minted `executorToken` is used when the receiver is the launch's own runtime API and the
  token still has more than the reuse margin of lifetime. Its expiry is read from the token itself (a JWT's
  `exp`) only to decide reuse, never to authenticate anything; an opaque token is not reused.
- Otherwise a dispatch token is asked for (`POST {receiver}/api/v2/internal/play-runtime/run-ledger-dispatch-token`,
  Bearer coordinatorInternalToken, `{runId, eventId, leaseOwner, schedulerSchema}`) and cached by schema,
  dispatch authority and receiver URL while it has more than the margin left. A token whose lifetime cannot be
  read (no `expiresAt`, not a JWT) is used once, never cached. A receiver that refuses a token minted for another
  run scopes its tokens per run: for the next RUN_SCOPED_FOR_SECONDS its tokens are cached per run as well.
- Prefix batching (more than one fact per request) only when the dispatch-token answer granted
  `runLedgerIngressPrefixBatching: true` and the receiver's origin is immutable, and never on the ordinary
  receiver of a launch that names a distinct terminal projection origin.
- The resolved authority is cached per run and lease owner; when a fresh one names another origin within the
  same launch, delivery fails (the launch is immutable) unless it is the run's terminal projection origin.
- With `vercelProtectionBypassToken`, every request to the receiver carries Vercel's bypass header.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import hashlib
import json
import time
from dataclasses import dataclass

import httpx

from scheduler import messages, outbound
from scheduler.bounded_map import BoundedMap
from scheduler.conf import scheduler_settings
from scheduler.outbox.facts import Prefix
from scheduler.outbox.routing import DeliveryError, distinct_terminal_origin, is_immutable_origin, ordinary_receiver
from scheduler.redaction import launch_secrets, redact_text

TOKEN_PATH = "/api/v2/internal/play-runtime/run-ledger-dispatch-token"
TOKEN_REUSE_MARGIN_SECONDS = 30
BYPASS_HEADER = "x-vercel-protection-bypass"
ORIGIN_CHANGED = messages.DISPATCH_ORIGIN_CHANGED
MAX_CACHED = 10_000


@dataclass(frozen=True)
class Authority:
    base_url: str
    token: str
    pre_minted: bool  # the launch's executorToken, not a dispatch token
    prefix_batching: bool
    expires_at: float | None
    cache_key: str | None = None
    minted_for: str | None = None  # the run a dispatch token was asked for

    def reusable(self) -> bool:
        return self.expires_at is not None and self.expires_at > time.time() + TOKEN_REUSE_MARGIN_SECONDS


def token_expiry(token) -> float | None:
    """A JWT's `exp` (seconds), read without verifying anything; None for an opaque token."""
    if not isinstance(token, str) or token.count(".") != 2:
        return None
    payload = token.split(".")[1]
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (ValueError, TypeError):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, (int, float)) and not isinstance(exp, bool) else None


class _Cache(BoundedMap):
    """A token cache: bounded, and a token that can no longer be reused is the first to leave."""

    def __init__(self):
        super().__init__(MAX_CACHED, spent=lambda authority: not authority.reusable())


DISPATCH_TOKENS = _Cache()   # (schema, dispatch authority, receiver URL) -> Authority
RUN_AUTHORITIES = _Cache()   # (schema, run, lease owner) -> Authority
_REFUSED_EXECUTOR_TOKENS: set[str] = set()  # hashes of pre-minted tokens a receiver answered 401 to
# A receiver (by its dispatch-token cache key) that refused a dispatch token minted for another run scopes its tokens
# per run: until the time kept here, its tokens are cached per run too, so a run's first request does not offer
# another run's token only to be refused (a 401, a mint and a retry every run). Then it is offered a shared one again.
RUN_SCOPED_FOR_SECONDS = 600.0
_RUN_SCOPED_RECEIVERS: dict[str, float] = {}


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def token_cache_key(schema: str, launch: dict, receiver_url: str) -> str:
    authority = {key: value for key, value in sorted(launch.items()) if key != "executorToken"}
    return _digest(json.dumps([schema, authority, receiver_url], sort_keys=True))


def protection_headers(launch: dict) -> dict[str, str]:
    token = launch.get("vercelProtectionBypassToken")
    return {BYPASS_HEADER: token} if isinstance(token, str) and token else {}


# Deliveries reuse their connections (outbound.py: one pooled transport per receiver origin and thread).
TIMEOUT = httpx.Timeout(15.0, connect=5.0)


def post(url: str, bearer: str, body: dict, launch: dict, extra_secrets=()):
    """(status, JSON answer or None); an unreachable receiver raises DeliveryError with every secret scrubbed."""
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {bearer}", **protection_headers(launch)}
    try:
        response = outbound.request("POST", url, content=json.dumps(body).encode(), headers=headers, timeout=TIMEOUT)
    except httpx.HTTPError as error:
        secrets = launch_secrets(launch) + [bearer, *extra_secrets]
        raise DeliveryError(redact_text(f"receiver unreachable: {type(error).__name__}: {error}", secrets)) from None
    if not 200 <= response.status_code < 300 or not response.content:
        return response.status_code, None
    try:
        return response.status_code, response.json()
    except ValueError:
        return response.status_code, None


def _pre_minted(launch: dict, base_url: str) -> Authority | None:
    token = launch.get("executorToken")
    if base_url != ordinary_receiver(launch) or not isinstance(token, str) or _digest(token) in _REFUSED_EXECUTOR_TOKENS:
        return None
    candidate = Authority(base_url, token, True, False, token_expiry(token))
    return candidate if candidate.reusable() else None


def _expiry(body: dict, token: str) -> float | None:
    expires = body.get("expiresAt")
    if isinstance(expires, str):
        try:
            return dt.datetime.fromisoformat(expires.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    return token_expiry(token)


def batching_granted(answer: dict, receiver_url: str) -> bool:
    """The dispatch-token answer granted prefix batching, and the receiver's origin is immutable."""
    return answer.get("runLedgerIngressPrefixBatching") is True and is_immutable_origin(receiver_url)


def _run_scoped(receiver_key: str) -> bool:
    until = _RUN_SCOPED_RECEIVERS.get(receiver_key)
    if until is not None and until <= time.monotonic():
        _RUN_SCOPED_RECEIVERS.pop(receiver_key, None)
        return False
    return until is not None


def _dispatch_token(prefix: Prefix, base_url: str, *, fresh: bool) -> Authority:
    launch = prefix.dispatch_launch or {}
    key = token_cache_key(scheduler_settings.schema, launch, base_url)
    if _run_scoped(key):
        key = _digest(json.dumps([key, prefix.run_id]))
    cached = None if fresh else DISPATCH_TOKENS.get(key)
    if cached is not None and cached.reusable():
        return cached
    coordinator = launch.get("coordinatorInternalToken")
    if not isinstance(coordinator, str) or not coordinator:
        raise DeliveryError("launch has no coordinatorInternalToken for its run-ledger receiver")
    status, body = post(base_url.rstrip("/") + TOKEN_PATH, coordinator, {
        "runId": prefix.run_id, "eventId": prefix.head.event_id, "leaseOwner": prefix.lease_owner,
        "schedulerSchema": scheduler_settings.schema,
    }, launch)
    if not 200 <= status < 300 or not isinstance(body, dict) or not isinstance(body.get("token"), str):
        raise DeliveryError(f"dispatch token request answered {status}")
    token = body["token"]
    authority = Authority(base_url, token, False, batching_granted(body, base_url), _expiry(body, token), key,
                          prefix.run_id)
    if authority.reusable():
        DISPATCH_TOKENS.put(key, authority)
    else:
        DISPATCH_TOKENS.pop(key)
    return authority


def resolve(prefix: Prefix, base_url: str, *, terminal_projection: bool, terminal_origin: str | None,
            fresh: bool = False) -> Authority:
    """The authority to deliver this prefix's route to `base_url` with (see the module's text)."""
    launch = prefix.dispatch_launch or {}
    run_key = (scheduler_settings.schema, prefix.run_id, prefix.lease_owner)
    cached = RUN_AUTHORITIES.get(run_key)
    if (not fresh and cached is not None and cached.reusable() and cached.base_url == base_url
            and (not terminal_projection or terminal_origin is None)):
        return cached
    authority = (None if fresh else _pre_minted(launch, base_url)) or _dispatch_token(prefix, base_url, fresh=fresh)
    if authority.prefix_batching and distinct_terminal_origin(launch, base_url):
        # A mutable source can seal array pages after the claim: never widen a nonterminal receipt into a
        # terminal on an older receiver; the next claim sees the terminal and picks its immutable owner.
        authority = dataclasses.replace(authority, prefix_batching=False)
    if cached is not None and cached.base_url != authority.base_url and authority.base_url != terminal_origin:
        raise DeliveryError(ORIGIN_CHANGED)
    RUN_AUTHORITIES.put(run_key, authority)
    return authority


def refused(prefix: Prefix, authority: Authority) -> None:
    """A receiver answered 401: forget the authority (a pre-minted token for good), so the next one is minted."""
    if authority.pre_minted:
        if len(_REFUSED_EXECUTOR_TOKENS) >= MAX_CACHED:
            _REFUSED_EXECUTOR_TOKENS.clear()
        _REFUSED_EXECUTOR_TOKENS.add(_digest(authority.token))
    if authority.cache_key:
        DISPATCH_TOKENS.pop(authority.cache_key)
    if authority.minted_for not in (None, prefix.run_id):
        if len(_RUN_SCOPED_RECEIVERS) >= MAX_CACHED:
            _RUN_SCOPED_RECEIVERS.clear()
        receiver_key = token_cache_key(scheduler_settings.schema, prefix.dispatch_launch or {}, authority.base_url)
        _RUN_SCOPED_RECEIVERS[receiver_key] = time.monotonic() + RUN_SCOPED_FOR_SECONDS
    RUN_AUTHORITIES.pop((scheduler_settings.schema, prefix.run_id, prefix.lease_owner))
