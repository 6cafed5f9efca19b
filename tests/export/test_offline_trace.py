"""Issue 35 item 1: offline is offline, seen from the system calls.

Guarding Python's ``socket`` cannot see what native code does: onnxruntime
1.32's Linux build resolves its telemetry collector (``mobile.events.data.
microsoft.com``) from a timer thread about ten seconds after it is imported,
and again when the process exits, whatever ``disable_telemetry_events()`` says.
So ``headseg segment`` runs under ``strace`` and every ``connect``/``sendto``/
``sendmsg`` is read: an internet address or anything to port 53 (DNS) fails.
A first export here takes about as long as that timer, so a run could pass by
luck; the held runs keep the process alive after the command returns, long
enough for the timer, and the cold run is repeated.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest



def _strace_problem() -> str | None:
    """Why system calls cannot be traced here (None when they can)."""
    if shutil.which("strace") is None:
        return "strace is not installed (apt-get install strace): native network calls cannot be seen"
    r = subprocess.run(["strace", "-f", "-o", os.devnull, "true"], capture_output=True, text=True)
    return None if r.returncode == 0 else f"strace cannot trace here: {r.stderr.strip()[:200]}"


_PROBLEM = _strace_problem()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(_PROBLEM is not None, reason=str(_PROBLEM))]

TEXT = ("The committee met on Monday. It approved the budget, after a long debate! Rain fell all night; the river "
        "rose quickly. Farmers moved their cattle to higher ground.\n")

#: seconds a held run stays alive after the command: longer than onnxruntime's telemetry timer (about 10 s)
HOLD_S = 15

#: the command line's entry point, then alive for HOLD_S seconds (the undo of main() does not matter:
#: onnxruntime reads its settings when it is loaded)
HELD = ("import sys, time\nfrom headseg.cli import main\nrc = main(sys.argv[2:])\ntime.sleep(float(sys.argv[1]))\n"
        "sys.exit(rc)\n")

CALL = re.compile(r"\b(connect|sendto|sendmsg)\(")
INET = re.compile(r'sin_port=htons\((\d+)\), sin_addr=inet_addr\("([^"]+)"\)')
INET6 = re.compile(r'sin6_port=htons\((\d+)\).*?inet_pton\(AF_INET6, "([^"]+)"')


def network_calls(trace: str) -> list[str]:
    """The traced calls that leave the machine: an internet address other than loopback, or port 53."""
    bad = []
    for line in trace.splitlines():
        if not CALL.search(line) or "AF_UNIX" in line or "AF_NETLINK" in line:
            continue
        m = INET.search(line) or INET6.search(line)
        if m is None:
            if "AF_INET" in line:
                bad.append(line)  # an internet address this parser cannot read is not trusted
            continue
        port, addr = int(m.group(1)), m.group(2)
        loopback = addr.startswith("127.") or addr in ("::1", "::ffff:127.0.0.1")
        if port == 53 or not loopback:
            bad.append(line)
    return bad


def test_network_calls_reads_strace_lines():
    lines = [
        'connect(7, {sa_family=AF_UNIX, sun_path="/run/uuidd/request"}, 110) = -1 ENOENT',
        'connect(9, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.255.255.53")}, 16) = 0',
        'connect(9, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("127.0.0.53")}, 16) = 0',
        'connect(3, {sa_family=AF_INET, sin_port=htons(8000), sin_addr=inet_addr("127.0.0.1")}, 16) = 0',
        'connect(3, {sa_family=AF_INET6, sin6_port=htons(443), sin6_flowinfo=htonl(0), '
        'inet_pton(AF_INET6, "2a01::1", &sin6_addr), sin6_scope_id=0}, 28) = 0',
        'sendto(9, "I\\262...", 50, MSG_NOSIGNAL, NULL, 0) = 50',
    ]
    assert network_calls("\n".join(lines)) == [lines[1], lines[2], lines[4]]


def _traced(argv: list[str], cache, home, trace) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ORT_DISABLE_TELEMETRY"}  # the command must set it
    env.update(HEADSEG_CACHE=str(cache), HOME=str(home), HF_HUB_OFFLINE="1")
    return subprocess.run(["strace", "-f", "-qq", "-e", "trace=connect,sendto,sendmsg", "-o", str(trace),
                           sys.executable, *argv], capture_output=True, text=True, env=env, timeout=600)


def test_issue35_item1_first_export_and_warm_run_make_no_network_call(tmp_path):
    doc = tmp_path / "doc.txt"
    doc.write_text(TEXT, encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    segment = ["segment", str(doc), "--quiet"]
    runs = []
    for i in range(3):  # first exports, each into an empty cache: the first held, the others as `headseg` runs
        argv = ["-c", HELD, str(HOLD_S), *segment] if i == 0 else ["-m", "headseg", *segment]
        runs.append((f"cold {i}", tmp_path / f"cache{i}", argv))
    runs.append(("warm", tmp_path / "cache0", ["-c", HELD, str(HOLD_S), *segment]))
    outputs = set()
    for name, cache, argv in runs:
        trace = tmp_path / f"trace-{name.replace(' ', '')}.txt"
        r = _traced(argv, cache, home, trace)
        assert r.returncode == 0, (name, r.stderr)
        assert r.stderr == "", (name, r.stderr)
        outputs.add(r.stdout)
        assert network_calls(trace.read_text()) == [], name
    assert len(outputs) == 1 and "The committee met" in outputs.pop()
    # onnxruntime's telemetry keeps a device id and an event database in the home: nothing is written there
    assert sorted(p.name for p in home.rglob("*")) == []


def test_issue35_item1_unwritable_home_gives_no_telemetry_warning(tmp_path):
    """With a home that cannot be written, onnxruntime's telemetry warned on stderr
    (``telemetry_1ds.cc ... Failed to persist telemetry device ID``)."""
    doc = tmp_path / "doc.txt"
    doc.write_text(TEXT, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "ORT_DISABLE_TELEMETRY"}
    env.update(HEADSEG_CACHE=str(tmp_path / "cache"), HOME=os.devnull, HF_HUB_OFFLINE="1")
    r = subprocess.run([sys.executable, "-m", "headseg", "segment", str(doc), "--quiet"], capture_output=True,
                       text=True, env=env, timeout=600)
    assert r.returncode == 0 and r.stderr == "", r.stderr
