"""Hang triage from NCCL RAS polls and the GPUs' power (sparkfleet.doctor.hang), on published RAS outputs."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from sparkfleet.cli import main
from sparkfleet.doctor import Status
from sparkfleet.doctor.hang import GpuReading, classify, parse_ras
from sparkfleet.doctor.observations import LinkObservation
from sparkfleet.doctor.serving import link_findings

RAS = Path(__file__).resolve().parents[1] / "fixtures" / "ras"


def test_the_docs_sample_reads_as_two_groups_of_ranks_and_progress_is_not_a_hang() -> None:
    text = (RAS / "docs-mid-collective.txt").read_text()
    poll = parse_ras(text)
    assert list(poll) == ["27a079b828ff1a75"] and sorted(poll["27a079b828ff1a75"].counts.values()) == [6649, 6650]
    later = parse_ras(text.replace("6650", "6702").replace("6649", "6702"))
    assert classify([poll, later]).kind == "progressing"
    # The same spread twice, five seconds apart, is no longer the docs' passing moment.
    frozen = classify([poll, poll])
    assert frozen.kind == "collective desync" and "6649 to 6650" in frozen.detail and "#2213" in frozen.source


def test_a_frozen_spread_on_four_sparks_names_the_rank_behind() -> None:
    poll = parse_ras((RAS / "gb10-desync.txt").read_text())
    assert poll["a3f5545bf4e7cf8c"].counts == {1: 27911, 2: 27890, 3: 27872, 0: 27860}
    verdict = classify([poll, poll, poll])
    assert verdict.kind == "collective desync" and "behind: rank 0" in verdict.detail
    assert "py-spy dump" in verdict.lever


def json_poll(counts: list[int], missing: list[dict[str, object]] | None = None) -> str:
    ranks = [{"rank": r, "collective_counts": {"AllReduce": c, "AllGather": 3}} for r, c in enumerate(counts)]
    return json.dumps({"communicators": [{"hash": "feaffc3e918467c3", "ranks": ranks, "missing_ranks": missing or []}]})


def test_frozen_and_equal_counts_with_gpus_spinning_at_idle_power_are_a_stuck_kernel() -> None:
    """vllm#48720: 96 % at ~18 W on every rank, counts equal: it was a compute kernel, not NCCL."""
    poll = parse_ras(json_poll([19500, 19500]))
    gpus = [GpuReading(host="s1", utilization=0.96, watts=18.4), GpuReading(host="s2", utilization=0.96, watts=20.8)]
    verdict = classify([poll, poll], gpus)
    assert verdict.kind == "stuck kernel" and verdict.spinning == ["s1", "s2"]
    assert "intent.moe_backend" in verdict.lever and "a kernel spins" in verdict.detail
    # A healthy GPU draws ~45 W: busy at that power is work, not a spin.
    assert classify([poll, poll], [GpuReading(host="s1", utilization=0.96, watts=45)]).spinning == []


def test_a_rank_ras_lost_and_a_single_poll_are_said_as_such() -> None:
    gone = parse_ras(json_poll([5, 5], [{"rank": 2, "host": "s3", "status": {"considered_dead": True}}]))
    assert classify([gone, gone]).kind == "process lost" and "rank 2 on s3" in classify([gone, gone]).detail
    assert classify([gone]).kind == "unknown"


def test_the_command_line_classifies_saved_polls(capsys: pytest.CaptureFixture[str]) -> None:
    desync = str(RAS / "gb10-desync.txt")
    assert main(["hang", desync, desync, "--gpu", "s1=0.96,18.4"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("collective desync: ") and "s1 at >= 90% GPU under 25 W" in out and "\ntry: " in out
    assert main(["hang", desync, "--gpu", "s1=busy"]) == 2
    assert "--gpu: 's1=busy' is not HOST=UTIL,WATTS" in capsys.readouterr().err


POLL_SCRIPT = Path(__file__).resolve().parents[2] / "roles" / "ray_cluster" / "files" / "sparkfleet_ras_poll.py"


def test_the_members_poll_reads_ras_as_nccl_serves_it_and_says_when_none_answers() -> None:
    text = (RAS / "gb10-desync.txt").read_text()
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        server.bind(("127.0.0.1", 28028))
    except OSError:
        pytest.skip("port 28028 is taken on this machine")
    server.listen()

    def serve() -> None:
        for _ in range(2):
            conn, _address = server.accept()
            conn.recv(100)
            conn.sendall(text.encode())
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    answered = json.loads(subprocess.run([sys.executable, str(POLL_SCRIPT), "2", "0.1"], capture_output=True, text=True, check=True).stdout)  # fmt: skip
    server.close()
    assert answered["error"] is None and answered["polls"] == [text, text]
    silent = json.loads(subprocess.run([sys.executable, str(POLL_SCRIPT), "2", "0.1"], capture_output=True, text=True, check=True).stdout)  # fmt: skip
    assert silent["polls"] == [] and "does not answer on 127.0.0.1:28028" in silent["error"]


def test_the_link_doctor_reports_the_communicators_with_the_lever() -> None:
    base = {"interface": "eth1", "accept_sockets": True, "platform": "gb10"}
    text = (RAS / "gb10-desync.txt").read_text()
    wedged = {"polls": [text, text], "error": None, "gpu": {"utilization": 0.96, "watts": 18.4}}
    found = [f for f in link_findings("s1", LinkObservation(**base, ras=wedged)) if f.check == "communicators"]
    assert found[0].status is Status.RED and found[0].detail.startswith("collective desync: ") and "try: " in found[0].detail
    quiet = {"polls": [], "error": "NCCL's RAS does not answer on 127.0.0.1:28028 (Connection refused)", "gpu": None}
    found = [f for f in link_findings("s1", LinkObservation(**base, ras=quiet)) if f.check == "communicators"]
    # Silence on an NCCL member is a hang check that cannot see: yellow, never green (issue 60).
    assert found[0].status is Status.YELLOW and "could not be classified" in found[0].detail
    cpu = {**base, "platform": "cpu"}
    found = [f for f in link_findings("s1", LinkObservation(**cpu, ras=quiet)) if f.check == "communicators"]
    assert found[0].status is Status.GREEN and "meet over gloo" in found[0].detail
    assert not [f for f in link_findings("s1", LinkObservation(**base)) if f.check == "communicators"]
