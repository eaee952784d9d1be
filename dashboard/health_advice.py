"""What a DEGRADED or BLOCKED component means for a trader, and what to do about it.

The reason a component reports says what happened; the advice here says what it means
and what to do. Matched on the reason first (the most specific), then on the component's
name, with a general explanation of the status as the last resort, so no non-healthy
row is shown without one.
"""

from __future__ import annotations

import re

from core.health import Status

_BY_REASON: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(r"stopping with open positions"),
        "A strategy was changed or removed while it held a position. Its old route keeps running, "
        "only to manage that position, until the position is closed; then it stops by itself. Close the "
        "position from the Positions panel (or let the strategy exit it) to end this state sooner.",
    ),
    (
        re.compile(r"degraded with open positions"),
        "A strategy failed while holding a position: the process stops so that a restart takes the position "
        "over. Read the strategy's error in the log, fix it, and restart the runtime.",
    ),
    (
        re.compile(r"falling behind"),
        "Signals arrive faster than they are handled. Check the machine's CPU load, or run fewer strategies or "
        "instruments in this process.",
    ),
    (
        re.compile(r"no signal hub in this process"),
        "This process does not trade. Start the runtime process that runs the trade executor (see docs/runtime.md).",
    ),
    (
        re.compile(r"broker .* unavailable"),
        "The broker did not answer. Orders are kept and retried; check the broker's status and the network, and "
        "log in again if a login prompt appears.",
    ),
    (
        re.compile(r"last signal failed"),
        "The last signal could not become an order (the error follows). The next signal is tried as usual; the "
        "Signals panel shows each signal's outcome.",
    ),
    (
        re.compile(r"no subscribed instruments"),
        "This feed has nothing to subscribe to. Add instruments to it in the admin, or disable the feed.",
    ),
    (
        re.compile(r"buffer full"),
        "The tick recorder cannot keep up with the database and dropped ticks from the recording (trading goes "
        "on). Check the database's load and disk.",
    ),
    (
        re.compile(r"write failed, retrying"),
        "The database refused the recorder's writes; it retries on its own. Check the database connection.",
    ),
    (
        re.compile(r"refused by the database"),
        "Some ticks could not be stored (reasons listed); the rest are recorded. Usually bad values from the venue.",
    ),
    (
        re.compile(r"^(re)?connecting$"),
        "The venue connection is being set up again; it recovers on its own within seconds. If it stays, check "
        "network access to the venue.",
    ),
    (
        re.compile(r"gap recovery failed"),
        "Ticks missed during a reconnect could not be fetched from the venue yet; it retries on its own.",
    ),
    (
        re.compile(r"failed attempts"),
        "The connection failed repeatedly, so retries are spaced out. Check the venue's status, the network and "
        "any credentials.",
    ),
    (
        re.compile(r"^no report for"),
        "The process that reports this component stopped reporting. Check in the Process table below that it "
        "still runs, and restart it if not.",
    ),
    (
        re.compile(r"no process has reported a run"),
        "A periodic job has not run. With Celery, check that exactly one beat and a worker run; embedded, that "
        "the site process runs.",
    ),
    (
        re.compile(r"last run failed"),
        "The periodic job's last run raised an error (shown above); it runs again on schedule. The log has the "
        "traceback.",
    ),
    (
        re.compile(r"^not running"),
        "Strategies are not running in this process for the reason shown; trading on them is paused.",
    ),
]

_BY_COMPONENT: list[tuple[str, str]] = [
    (
        "orders:reconciliation",
        "The site and the broker disagree on some orders or positions; reconciliation converges on the broker. "
        "Decide on any order listed under 'Orders needing a decision'.",
    ),
    ("feed:", "Prices from this feed are late or missing, so strategies on it see no new ticks until it recovers."),
    ("job:", "A periodic job is late or failing; its last result is shown above."),
    ("redis", "Redis is slow or unreachable: live prices may pause; the site falls back and recovers by itself."),
    ("processor", "Strategies run only partly; the reason above names the part."),
]

_BY_STATUS = {
    Status.DEGRADED: (
        "Working, but only partly: the reason above names what is missing. It usually recovers on its own; if it "
        "stays for minutes, check the process log."
    ),
    Status.BLOCKED: (
        "Not working: the site reports not-ready until this clears. Check the process log and restart the process "
        "if it does not recover."
    ),
}


def health_advice(component: str, status: Status | str, reason: str) -> str:
    """The advice for a component in `status` for `reason`; empty when it is healthy."""
    status = Status(status)
    if status is Status.HEALTHY:
        return ""
    for pattern, advice in _BY_REASON:
        if pattern.search(reason or ""):
            return advice
    for prefix, advice in _BY_COMPONENT:
        if component.startswith(prefix):
            return advice
    return _BY_STATUS[status]
