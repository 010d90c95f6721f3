"""Where the time between verdicts goes, from a request trace (issue 21; the trace:
:mod:`kbv.processes.request_trace`, written by any kbv run with ``KBV_REQUEST_TRACE=FILE`` set).

    PYTHONPATH=src python3 bench/request_trace.py FILE [--json OUT] [--skip N]

For each verification (after the first ``--skip``, default 1: the cold one), splits its wall into
the worker's time (each request's send to its reply readable: the candidate worker's work, its
harness checks and the pipe), the reply's decode (the trusted side's, shared memory mapped), and
the rest of the trusted side's time; per stage (the pipeline's own ``phase_seconds`` marks, a
request in the stage whose mark spans it) and per request type: count, worker seconds, decode
seconds. Also the time between one verification's end and the next one's start (the lane's own
work: store writes, the next job's set-up), and within it the lane's marks (``lane`` events of the
reference worker: the job received, its reference built, its early workers taken, its reply sent):
each mark's median seconds since the mark before it. Medians over verifications; in seconds.
Per verification too (``per_job``): its candidate file, wall, and each worker's first ``Forward``
(send to reply readable; a JIT such as Triton's compiles there, on the job's critical path).
"""

from __future__ import annotations

import argparse
import json
import statistics as st
from collections import defaultdict
from pathlib import Path


def _jobs(events: list[dict]) -> list[list[dict]]:
    """The events of each verification (``verify`` start to end), in order."""
    jobs, cur = [], None
    for e in events:
        if e["ev"] == "verify" and e["what"] == "start":
            cur = [e]
        elif cur is not None:
            cur.append(e)
            if e["ev"] == "verify" and e["what"] == "end":
                jobs.append(cur)
                cur = None
    return jobs


def summarise_job(job: list[dict]) -> dict:
    """One verification's split (module doc)."""
    t0, t1 = job[0]["t"], job[-1]["t"]
    stages = [(e["name"], e["t"] - e["seconds"], e["t"]) for e in job if e["ev"] == "stage"]

    def stage_of(t: float) -> str:
        # half-open: a request sent as one stage ends and the next begins is the next one's; a start
        # is read back from the mark (its time less its seconds), a little late: 1 ms of slack
        inside = [(end - start, name) for name, start, end in stages if start - 1e-3 <= t < end]
        return min(inside)[1] if inside else "between stages"

    sent: dict[int, dict] = {}
    first_forward: dict[int, float] = {}  # worker pid -> its first Forward's seconds
    per_stage: dict = defaultdict(lambda: {"requests": 0, "worker_s": 0.0, "decode_s": 0.0})
    per_req: dict = defaultdict(lambda: {"requests": 0, "worker_s": 0.0, "decode_s": 0.0})
    for e in job:
        if e["ev"] == "send":
            sent[e["pid"]] = e
        elif e["ev"] == "reply" and e["pid"] in sent:
            s = sent.pop(e["pid"])
            w, d = e["t_readable"] - s["t"], e["t"] - e["t_readable"]
            if s["req"] == "Forward":
                first_forward.setdefault(e["pid"], w)
            for row in (per_stage[stage_of(s["t"])], per_req[s["req"]]):
                row["requests"] += 1
                row["worker_s"] += w
                row["decode_s"] += d
    stage_s = {name: end - start for name, start, end in stages}
    for name, row in per_stage.items():
        row["stage_s"] = stage_s.get(name)
    worker = sum(r["worker_s"] for r in per_req.values())
    decode = sum(r["decode_s"] for r in per_req.values())
    return {"wall_s": t1 - t0, "worker_s": worker, "decode_s": decode, "trusted_rest_s": t1 - t0 - worker - decode,
            "requests": sum(r["requests"] for r in per_req.values()), "status": job[-1].get("status"),
            "candidate": Path(job[0].get("candidate") or "?").name,
            "first_forward_s": [round(v, 4) for v in first_forward.values()],
            "stages": dict(per_stage), "request_types": dict(per_req)}


def _median_rows(rows: list[dict]) -> dict:
    keys = sorted({k for r in rows for k in r})
    out = {}
    for k in keys:
        vals = [r[k] for r in rows if k in r]
        out[k] = {f: round(st.median([v.get(f) or 0.0 for v in vals]), 4) for f in vals[0]}
    return out


def summarise(events: list[dict], skip: int = 1) -> dict:
    """The median split over the verifications after the first ``skip`` (module doc)."""
    jobs = _jobs(events)
    gaps = [b[0]["t"] - a[-1]["t"] for a, b in zip(jobs, jobs[1:])][skip:]
    per = [summarise_job(j) for j in jobs][skip:]
    lane = defaultdict(list)
    last = None
    for e in events:
        if e["ev"] == "lane":
            if last is not None:
                lane[e["what"]].append(e["t"] - last)
            last = e["t"]
    if not per:
        return {"jobs": 0}
    med = {k: round(st.median([p[k] for p in per]), 4) for k in ("wall_s", "worker_s", "decode_s", "trusted_rest_s",
                                                                 "requests")}
    return {"jobs": len(per), "median": med, "between_jobs_s": round(st.median(gaps), 4) if gaps else None,
            "lane_marks_s": {k: round(st.median(v[skip:] or v), 4) for k, v in lane.items()},
            "stages": _median_rows([p["stages"] for p in per]),
            "request_types": _median_rows([p["request_types"] for p in per]),
            "statuses": [p["status"] for p in per],
            "per_job": [{"candidate": p["candidate"], "wall_s": round(p["wall_s"], 4),
                         "first_forward_s": p["first_forward_s"]} for p in per]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", type=Path)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--skip", type=int, default=1)
    a = ap.parse_args()
    events = [json.loads(line) for line in a.trace.read_text(encoding="utf-8").splitlines() if line.strip()]
    out = summarise(events, a.skip)
    text = json.dumps(out, indent=1)
    if a.json:
        a.json.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
