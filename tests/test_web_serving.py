"""The workshop's Serving view (/api/serving and its tab): the API against the serving library
(``sweep_concurrency`` called directly) and against ``roofline serving --sweep ... --json``, the same
numbers for the same inputs; bad input as a 422 naming the field; each endpoint refusing the
others' parameters; the sweep's bound; and the tab in headless Chromium, its readouts read off the
page against the API's figures.

Set ROOFLINE_SCREENSHOT_DIR=dir to keep the tab's screenshot there (serving-web.png)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import os
import warnings
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the web extra is not installed: pip install 'roofline[web]'")
pytest.importorskip("httpx", reason="FastAPI's TestClient needs httpx")

with warnings.catch_warnings():  # newer Starlette suggests httpx2; httpx works
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from roofline.cli import main  # noqa: E402
from roofline.cost import seed_cost_model  # noqa: E402
from roofline.machines import get_machine  # noqa: E402
from roofline.plan import Precision  # noqa: E402
from roofline.serving import Engine, sweep_concurrency  # noqa: E402
from roofline.plan.step import StepCost  # noqa: E402
from roofline.transformer import get_model  # noqa: E402
from roofline.web.app import (SWEEP_BUDGET_S, concurrencies, create_app, requests_per_point,  # noqa: E402
                              simulation_cost_s)

from test_web_api import MACHINE_FILE, _close  # noqa: E402  (tests/ is on sys.path: one machine file for the web tests)

# A small workload: a sweep to 16 users, TTFT p90 <= 100 ms and TPOT p90 <= 8 ms (met up to 8 users), $2.50
# per GPU-hour.
BASE = {"input_len": 512, "output_len": 64, "max_users": 16, "slo_ttft_ms": 100, "slo_tpot_ms": 8,
        "price_per_gpu_hour": 2.5}
CLI_BASE = ["--input-len", "512", "--output-len", "64", "--slo-ttft", "100ms", "--slo-tpot", "8ms", "--price", "2.5"]


def _cli_json(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0
    return json.loads(out.getvalue())


def _library_step(model="llama3-8b", machine="h100-sxm", dtype=None, tp=1, e_c=0.70, e_m=0.85, launch_s=None,
                  engine=Engine(), precision=None):
    """The step `roofline serving` builds: the workshop plate's cost model with the machine's launch,
    a CUDA graph for decode-only steps, one dtype (or a quantised checkpoint's weights as stored), or
    the ``precision`` given."""
    m = get_machine(machine)
    cm = dataclasses.replace(seed_cost_model(compute_efficiency=e_c, memory_efficiency=e_m,
                                             launch_overhead_s=m.launch_overhead_s if launch_s is None else launch_s),
                             cuda_graph=True)
    cfg = get_model(model)
    if precision is not None:
        pass
    elif dtype is None and cfg.storage.parts:
        precision = Precision.as_stored(cfg, m.default_dtype)
    else:
        precision = Precision.uniform(dtype or m.default_dtype, m)
    return StepCost(cfg, m, precision, tensor_parallel=tp, cost_model=cm, attention="flash",
                    max_tokens=engine.max_tokens, max_seqs=engine.max_seqs)


# -- the API against the library and the CLI -------------------------------------------------------

def test_the_sweep_runs_1_2_4_up_to_max_users_and_says_how_many_requests():
    assert concurrencies(1) == [1]
    assert concurrencies(16) == [1, 2, 4, 8, 16]
    assert concurrencies(100) == [1, 2, 4, 8, 16, 32, 64, 100]
    assert [requests_per_point(u) for u in (1, 16, 250, 256, 2000, 4096)] == [8, 128, 2000, 2000, 2000, 4096]


def test_each_point_is_the_librarys_sweep_concurrency(client):
    body = client.get("/api/serving", params=BASE).json()
    assert body["concurrencies"] == [1, 2, 4, 8, 16] and body["bound"]["left_out"] == []
    assert body["requests_per_point"] == [8, 16, 32, 64, 128]
    step = _library_step()
    for users, n, point in zip(body["concurrencies"], body["requests_per_point"], body["points"]):
        expected = sweep_concurrency(step, [users], 512, 64, Engine(), requests=n, seed=0, price_per_gpu_hour=2.5,
                                     ttft_s=0.1, tpot_s=0.008, percentile=90.0)
        _close(point, json.loads(json.dumps(expected.to_dict()))["points"][0], f"users {users}")
    # the SLO: the highest concurrency meeting both targets (met at low load, the TTFT missed at 16)
    assert body["slo"]["ttft_s"] == pytest.approx(0.1) and body["slo"]["tpot_s"] == pytest.approx(0.008)
    met = [p["concurrency"] for p in body["points"] if p["meets_slo"]]
    assert met and body["slo"]["best"] == max(met) == body["best_users"] < 16
    assert body["engine"] == json.loads(json.dumps(dataclasses.asdict(Engine())))


def test_points_with_as_many_requests_are_one_library_sweep(client):
    """Past 250 users each point runs 2,000 requests: the API's points are then sweep_concurrency
    over those concurrencies with requests=2000, as one call."""
    body = client.get("/api/serving", params={"input_len": 128, "output_len": 16, "max_users": 512,
                                              "max_seqs": 512}).json()
    assert body["concurrencies"][-2:] == [256, 512] and body["requests_per_point"][-2:] == [2000, 2000]
    engine = Engine(max_seqs=512)
    expected = sweep_concurrency(_library_step(engine=engine), [256, 512], 128, 16, engine, requests=2000)
    _close(body["points"][-2:], json.loads(json.dumps(expected.to_dict()))["points"])
    assert body["slo"] is None and all("meets_slo" not in p for p in body["points"])


def test_the_api_gives_the_clis_numbers(client):
    body = client.get("/api/serving", params=BASE).json()
    for users, n, point in zip(body["concurrencies"], body["requests_per_point"], body["points"]):
        cli = _cli_json("serving", "--model", "llama3-8b", "--machine", "h100-sxm", "--sweep", str(users),
                        "--requests", str(n), *CLI_BASE, "--json")
        _close(point, cli["points"][0], f"users {users}")
        assert cli["model"] == body["model"] and cli["description"] == body["description"] and cli["notes"] == body["notes"][:len(cli["notes"])]


def test_the_breakdown_is_the_clis_decode_step(client):
    body = client.get("/api/serving", params=BASE).json()
    users = body["shown_users"]
    assert users == body["best_users"]
    n = body["requests_per_point"][body["concurrencies"].index(users)]
    cli = _cli_json("serving", "--sweep", str(users), "--requests", str(n), *CLI_BASE, "--breakdown", "--json")
    ours, theirs = body["breakdown"], cli["breakdown"]["decode_step"]
    assert (ours["decode_batch"], ours["context"]) == (theirs["decode_batch"], theirs["context"])
    assert ours["time_s"] == pytest.approx(theirs["time_s"], rel=1e-9)
    _close(ours["ops"], theirs["ops"])
    # the step's ops add up to its time, and the table's shares to 100%
    assert sum(o["time_s"] for o in ours["ops"]) == pytest.approx(ours["time_s"], rel=1e-9)
    assert ours["title"].startswith(f"One decode step at {users} users: {ours['decode_batch']} sequences at")


@pytest.mark.parametrize("params, argv, library", [
    # a quantised checkpoint's weights as stored (MXFP4 experts), as the CLI prices them without --dtype
    ({"model": "gpt-oss-20b"}, ["--model", "gpt-oss-20b"], {"model": "gpt-oss-20b"}),
    # fp8 on two GPUs over NVLink, the page's efficiencies and launch
    ({"dtype": "fp8", "tp": 2, "compute_efficiency": 0.6, "memory_efficiency": 0.8, "launch_overhead_us": 5},
     ["--dtype", "fp8", "--tp", "2", "--compute-efficiency", "0.6", "--memory-efficiency", "0.8", "--launch-overhead", "5us"],
     {"dtype": "fp8", "tp": 2, "e_c": 0.6, "e_m": 0.8, "launch_s": 5e-6}),
    ({"machine": "mi300x", "model": "qwen3-8b"}, ["--machine", "mi300x", "--model", "qwen3-8b"],
     {"machine": "mi300x", "model": "qwen3-8b"}),
    # each part over dtype: int4 weights under fp8 (W4A8: fp8 matmuls, bf16 between ops), a bf16 cache
    ({"dtype": "fp8", "weights": "int4", "kv_cache": "bf16"}, ["--dtype", "fp8", "--weights", "int4", "--kv-cache", "bf16"],
     {"precision": Precision("int4", "bf16", "bf16", matmul="fp8")}),
])
def test_models_machines_and_precisions_agree_with_the_cli_and_library(client, params, argv, library):
    body = client.get("/api/serving", params={**BASE, "max_users": 4, **params}).json()
    assert body["concurrencies"] == [1, 2, 4]
    step = _library_step(**library)
    for users, n, point in zip(body["concurrencies"], body["requests_per_point"], body["points"]):
        cli = _cli_json("serving", "--sweep", str(users), "--requests", str(n), *CLI_BASE, *argv, "--json")
        _close(point, cli["points"][0], f"cli, users {users}")
        lib = sweep_concurrency(step, [users], 512, 64, Engine(), requests=n, price_per_gpu_hour=2.5, ttft_s=0.1,
                                tpot_s=0.008)
        _close(point, json.loads(json.dumps(lib.to_dict()))["points"][0], f"library, users {users}")


def test_readouts_sentence_and_charts_come_from_the_points(client):
    body = client.get("/api/serving", params=BASE).json()
    best = body["best_users"]
    row = next(p for p in body["points"] if p["concurrency"] == best)
    r = body["readouts"]
    assert r["users"] == best and r["output_tokens_per_s_per_gpu"] == row["output_tokens_per_s_per_gpu"]
    assert r["per_user_tokens_per_s"] == row["per_user_tokens_per_s"]
    assert r["cost_per_million_output_tokens"] == row["cost_per_million_output_tokens"]
    # the readout's TTFT p90 is the percentile the SLO is judged at: at or under the target at the best point
    assert r["ttft_s"] <= 0.1 and r["tpot_s"] <= 0.008
    assert r["text"]["best"] == f"{best} users" and r["text"]["ttft_name"] == "TTFT p90"
    assert r["text"]["gpu"] == f"{row['output_tokens_per_s_per_gpu']:,.0f} tokens/s"
    assert body["verdict"]["state"] == "meets"
    assert body["sentence"].startswith(f"Llama 3 8B on one H100 SXM, 512-token prompts and 64-token answers: up to {best} "
                                       "concurrent users meet TTFT p90 ≤ 100 ms and TPOT p90 ≤ 8 ms")
    curve = body["chart"]
    assert curve["users"] == body["concurrencies"]
    assert curve["output_tokens_per_s_per_gpu"] == [p["output_tokens_per_s_per_gpu"] for p in body["points"]]
    assert curve["per_user_tokens_per_s"] == [p["per_user_tokens_per_s"] for p in body["points"]]
    assert curve["meets_slo"] == [p["meets_slo"] for p in body["points"]]
    assert curve["text"] == ["1", "2", "4", "8", "16"] and curve["best"] == body["concurrencies"].index(best)
    lat = body["latency_chart"]
    # the latencies come in the unit of the slowest of them and the targets: ms from 10 ms, s from 1 s
    slowest = max([p[k] for p in body["points"] for k in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s")] + [0.1, 0.008])
    unit, per_unit = ("µs", 1e-6) if slowest < 0.01 else ("ms", 1e-3) if slowest < 1 else ("s", 1.0)
    assert (lat["axis"]["unit"], lat["axis"]["title"]) == (unit, f"latency ({unit})")
    assert lat["ttft_p50"] == pytest.approx([p["ttft_p50_s"] / per_unit for p in body["points"]], rel=1e-12)
    assert lat["ttft_p99"] == pytest.approx([p["ttft_p99_s"] / per_unit for p in body["points"]], rel=1e-12)
    assert lat["tpot_p50"] == pytest.approx([p["tpot_p50_s"] / per_unit for p in body["points"]], rel=1e-12)
    assert [(t["name"], t["value"]) for t in lat["targets"]] == [("TTFT", pytest.approx(0.1 / per_unit)),
                                                                  ("TPOT", pytest.approx(0.008 / per_unit))]
    assert lat["ticks"]["values"] == [1, 2, 4, 8, 16]
    # throughput per GPU rises with users, the speed each user sees falls
    gpu = curve["output_tokens_per_s_per_gpu"]
    assert all(a < b for a, b in zip(gpu, gpu[1:]))
    assert curve["per_user_tokens_per_s"][0] > curve["per_user_tokens_per_s"][-1]


def test_without_targets_the_last_point_is_shown_and_with_impossible_ones_none_meets(client):
    free = client.get("/api/serving", params={"max_users": 8, "input_len": 256, "output_len": 32}).json()
    assert free["slo"] is None and free["best_users"] is None and free["shown_users"] == 8
    assert free["verdict"]["state"] == "none" and free["readouts"]["text"]["best_name"] == "Highest concurrency swept"
    assert free["chart"]["meets_slo"] == [True] * 4 and free["latency_chart"]["targets"] == []
    hard = client.get("/api/serving", params={"max_users": 8, "input_len": 256, "output_len": 32, "slo_ttft_ms": 0.001}).json()
    assert hard["slo"]["best"] is None and hard["verdict"]["state"] == "misses" and hard["readouts"]["text"]["best"] == "none"
    assert hard["sentence"].split(": ", 1)[1].startswith("no concurrency from 1 to 8 users meets TTFT p90 ≤ 0.001 ms")
    assert hard["breakdown"]["users"] == 8  # the last point, as `roofline serving --breakdown`


def test_one_output_token_has_no_tpot_and_the_json_stays_finite(client):
    r = client.get("/api/serving", params={"max_users": 4, "output_len": 1})
    assert r.status_code == 200
    body = json.loads(r.text, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert all(p["tpot_p50_s"] is None and p["per_user_tokens_per_s"] is None for p in body["points"])
    assert body["chart"]["empty_text"] and body["readouts"]["text"]["user"] == "—"


# -- bad input ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("field, value", [
    ("max_users", "0"), ("max_users", "4097"), ("input_len", "-1"), ("input_len", "131073"), ("output_len", "0"),
    ("output_len", "1e9"), ("slo_ttft_ms", "NaN"), ("slo_ttft_ms", "inf"), ("slo_ttft_ms", "0"), ("slo_ttft_ms", "5e-324"), ("slo_tpot_ms", "-1"), ("price_per_gpu_hour", "1e-31"),
    ("memory_fraction", "1e-300"), ("percentile", "1e-300"),
    ("slo_tpot_ms", "nan"), ("percentile", "0"), ("percentile", "101"), ("price_per_gpu_hour", "nan"), ("tp", "0"),
    ("tp", "65"), ("max_seqs", "0"), ("max_tokens", "0"), ("memory_fraction", "0"), ("memory_fraction", "1.5"),
    ("prefix_hit", "-0.1"), ("prefix_hit", "2"), ("compute_efficiency", "nan"), ("launch_overhead_us", "-1"),
    ("dtype", "tf32"), ("machine", "h100-sxmm"), ("model", "llama9"), ("attention", "paged"), ("input_len", "8k"),
    ("max_users", ""),
])
def test_bad_input_is_a_422_naming_the_field(client, field, value):
    r = client.get("/api/serving", params={field: value})
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["field"] == field and body["detail"][0]["loc"] == ["query", field] and body["detail"][0]["msg"]


def test_each_endpoint_refuses_the_parameters_of_the_others(client):
    r = client.get("/api/serving", params={"tokens": 5})
    assert r.status_code == 422 and r.json()["field"] == "tokens" and "/api/serving takes" in r.text
    r = client.get("/api/layer", params={"input_len": 5})
    assert r.status_code == 422 and r.json()["field"] == "input_len" and "/api/layer takes" in r.text
    r = client.get("/api/decode", params={"input_len": 2, "bogus": 1})
    assert r.status_code == 422 and r.json()["fields"] == ["bogus", "input_len"]
    r = client.get("/api/machines", params={"tokens": 5})
    assert r.status_code == 422 and "takes no query parameters" in r.text
    r = client.get("/api/serving?max_users=4&max_users=8")
    assert r.status_code == 422 and r.json()["field"] == "max_users" and "2 times" in r.text
    assert client.get("/api/nothing-here", params={"x": 1}).status_code == 404
    # what each endpoint takes is what its schema documents, and the page is told it
    schema = client.get("/openapi.json").json()["paths"]
    options = client.get("/api/options").json()
    for view in ("layer", "model", "decode", "serving"):
        names = sorted(p["name"] for p in schema[f"/api/{view}"]["get"]["parameters"])
        assert options["view_parameters"][view] == names, view
    assert {"input_len", "output_len", "max_users", "slo_ttft_ms", "slo_tpot_ms", "tp"} <= set(options["view_parameters"]["serving"])
    assert "tokens" not in options["view_parameters"]["serving"]


def test_library_errors_are_422_naming_the_apis_field(client):
    r = client.get("/api/serving", params={"tp": 3})  # 32 heads do not split 3 ways
    assert r.status_code == 422 and r.json()["field"] == "tp"
    r = client.get("/api/serving", params={"model": "llama3-70b"})  # 141 GB of weights on one 80 GB H100
    assert r.status_code == 422 and r.json()["field"] == "tp" and "no memory for a KV cache" in r.text
    assert client.get("/api/serving", params={"model": "llama3-70b", "tp": 4, "max_users": 4}).status_code == 200
    r = client.get("/api/serving", params={"max_seqs": 4096, "max_tokens": 1024})  # a budget under the sequences
    assert r.status_code == 422 and r.json()["field"] == "max_tokens" and "max_seqs" in r.text
    r = client.get("/api/serving", params={"machine": "v100", "dtype": "bf16"})
    assert r.status_code == 422 and r.json()["field"] == "dtype"
    r = client.get("/api/serving", params={"model": "llama3-70b", "machine": "h200", "tp": 2, "input_len": 131072,
                                           "output_len": 32768, "memory_fraction": 0.6})  # one request's cache does not fit
    assert r.status_code == 422 and r.json()["field"] in ("input_len", "tp")


def test_a_machine_without_a_memory_capacity_is_refused_naming_the_machine(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(MACHINE_FILE)
    r = TestClient(create_app([str(path)])).get("/api/serving", params={"machine": "my-gpu"})
    assert r.status_code == 422 and r.json()["field"] == "machine"


# -- the bound -----------------------------------------------------------------------------------------

def test_long_requests_leave_the_top_points_out_and_say_so(client):
    body = client.get("/api/serving", params={"input_len": 131072, "output_len": 32768, "max_users": 256}).json()
    assert body["concurrencies"][0] == 1 and body["concurrencies"][-1] < 256
    assert body["bound"]["left_out"][-1] == 256 and body["bound"]["estimated_cpu_s"] <= SWEEP_BUDGET_S
    assert "left out" in body["bound"]["text"] and "left out" in body["caption"]
    # at the defaults nothing is left out
    assert client.get("/api/serving").json()["bound"]["left_out"] == []


def test_a_sweep_no_user_can_run_within_the_bound_is_refused_by_name(client):
    r = client.get("/api/serving", params={"max_tokens": 1, "max_seqs": 1, "input_len": 131072, "output_len": 1})
    assert r.status_code == 422 and r.json()["field"] == "max_tokens" and "roofline serving" in r.text


@pytest.mark.parametrize("params", [
    {"max_users": 4096},
    {"max_users": 4096, "max_seqs": 4096, "max_tokens": 131072},
    {"max_users": 4096, "input_len": 131072, "output_len": 32768},
    {"max_users": 4096, "input_len": 128, "output_len": 4096, "model": "gemma3-27b"},
    {"max_users": 4096, "input_len": 131072, "output_len": 64, "model": "jamba", "machine": "h200", "tp": 2},
])
def test_the_slowest_corners_of_the_ranges_are_answered(client, params):
    """The estimate (simulation_cost_s) keeps the slowest corners of the ranges bounded, so each is
    answered (not refused as too much work); how long they take is benchmarks/bench_web.py's to say
    (a wall-clock limit here failed on a loaded CI machine at 2.3 s)."""
    r = client.get("/api/serving", params=params)
    assert r.status_code == 200, (params, r.text[:300])
    body = r.json()
    assert body["concurrencies"], params  # at least one point simulated, within the view's estimated budget
    assert body["bound"]["estimated_cpu_s"] <= body["bound"]["budget_s"], params


def test_the_cost_estimate_grows_with_the_work():
    engine = Engine()
    one = simulation_cost_s(1, 8, 1024, 256, engine, 300, 27)
    assert simulation_cost_s(256, 2000, 1024, 256, engine, 300, 27) > one
    assert simulation_cost_s(16, 128, 1024, 4096, engine, 300, 27) > simulation_cost_s(16, 128, 1024, 256, engine, 300, 27)
    assert simulation_cost_s(16, 128, 1024, 256, engine, 300, 54) > simulation_cost_s(16, 128, 1024, 256, engine, 300, 27)
    assert math.isfinite(simulation_cost_s(4096, 4096, 131072, 32768, engine, 0, 27))


def test_the_page_has_the_serving_tab(client):
    html = client.get("/").text
    for element_id in ("view-serving", "panel-serving", "input-len", "output-len", "max-users", "slo-ttft", "slo-tpot",
                       "dtype", "serving-curve-chart", "serving-latency-chart", "serving-best", "serving-gpu",
                       "serving-user", "serving-ttft", "serving-tpot", "serving-breakdown", "serving-notes"):
        assert f'id="{element_id}"' in html, element_id
    assert "/api/serving" in client.get("/static/app.js").text


# -- the tab in a real browser ---------------------------------------------------------------------------

def _browser_or_skip():
    for module, why in (("uvicorn", "the web extra is not installed"), ("playwright", "Playwright is not installed"),
                        ("pytest_playwright", "pytest-playwright is not installed")):
        pytest.importorskip(module, reason=why)
    from web_harness import CHROMIUM_MISSING, chromium_path

    if chromium_path() is None:
        pytest.skip(CHROMIUM_MISSING)


def test_the_serving_caption_names_the_precision_as_simulated(client):
    """A reviewer's fp8 on an A100 (no fp8 peak: fp8 weights, bf16 matmuls and KV) and on an H100
    (W8A8, an fp8 KV cache) drew under one caption naming neither; the caption is the run's own
    description, the CLI's header line."""
    a100 = client.get("/api/serving", params={"machine": "a100-80gb", "dtype": "fp8", "max_users": 4}).json()
    h100 = client.get("/api/serving", params={"machine": "h100-sxm", "dtype": "fp8", "max_users": 4}).json()
    assert a100["caption"].startswith(a100["description"].split(";")[0]) and "A100" in a100["caption"]
    assert "weights fp8, activations bf16, KV bf16" in a100["caption"]
    assert "KV bf16" not in h100["caption"] and "H100" in h100["caption"]
    assert "the whole sweep within about" in a100["caption"]


@pytest.fixture(scope="module")
def base_url_web():
    _browser_or_skip()
    from web_harness import background_server

    with background_server(create_app()) as url:
        yield url


def _renders(page) -> int:
    return int(page.evaluate("Number(document.body.dataset.renderCount || 0)"))


def _wait(page, after: int, query_part: str = "") -> None:
    page.wait_for_function(
        "([n, q]) => Number(document.body.dataset.renderCount || 0) > n && (document.body.dataset.query || '').includes(q)",
        arg=[after, query_part], timeout=20000)


def _type(page, selector, value, query_part):
    before = _renders(page)
    page.fill(selector, str(value))
    page.press(selector, "Enter")
    _wait(page, before, query_part)


def _text(page, selector):
    return page.inner_text(selector).strip()


def test_the_serving_tab_draws_the_sweep_and_reads_as_the_api(page, base_url_web, tmp_path):
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_viewport_size({"width": 1400, "height": 800})
    page.goto(base_url_web + "/")
    _wait(page, 0)
    assert page.is_hidden("#panel-serving") and page.is_hidden("#serving-controls")
    before = _renders(page)
    page.click("#view-serving")
    _wait(page, before, "view=serving")
    assert page.get_attribute("#view-serving", "aria-selected") == "true" and page.is_visible("#panel-serving")
    assert page.is_visible("#serving-controls") and page.is_hidden("#workload-controls")
    page.wait_for_function("document.getElementById('serving-curve-chart').data !== undefined")
    # the page's defaults: 1,024 in, 256 out, to 256 users, TTFT p90 <= 500 ms, TPOT p90 <= 30 ms
    assert page.input_value("#input-len") == "1024" and page.input_value("#output-len") == "256"
    assert page.input_value("#max-users") == "256"
    assert page.input_value("#slo-ttft") == "500" and page.input_value("#slo-tpot") == "30"
    query = page.evaluate("document.body.dataset.query")
    assert "tokens=" not in query and "batch=" not in query and "slo_ttft_ms=500" in query
    api = page.request.get(base_url_web + "/api/serving?" + query.split("&", 1)[1]).json()
    best = api["best_users"]
    assert best is not None
    assert _text(page, "#serving-best") == f"{best} users" == api["readouts"]["text"]["best"]
    assert _text(page, "#serving-gpu") == f"{api['readouts']['output_tokens_per_s_per_gpu']:,.0f} tokens/s"
    assert _text(page, "#serving-ttft") == api["readouts"]["text"]["ttft"]
    assert _text(page, "#serving-user") == api["readouts"]["text"]["user"]
    assert _text(page, "#serving-sentence") == api["sentence"]
    assert page.get_attribute("#serving-verdict", "data-state") == "meets"
    # the curve: per GPU against per user, one point per concurrency, filled where the targets hold
    curve = page.evaluate("document.getElementById('serving-curve-chart').data.map(t => [t.name, t.x, t.y, t.text])")
    names = [c[0] for c in curve]
    assert names[:3] == ["the sweep", "meets the targets", "misses the targets"] and "best within the targets" in names
    met = curve[1]
    assert met[3] == [str(p["concurrency"]) for p in api["points"] if p["meets_slo"]]
    assert met[2] == [p["output_tokens_per_s_per_gpu"] for p in api["points"] if p["meets_slo"]]
    lat = page.evaluate("(() => { const d = document.getElementById('serving-latency-chart'); "
                        "return [d.layout.xaxis.type, d.layout.yaxis.type, d.data.map(t => t.name), d.layout.shapes.length]; })()")
    # p50 and p99 as benchmarks print them, and p90: the percentile the cards and the targets use
    # and each target, named in the legend (a label on the chart sat on the curve crossing its line)
    assert lat == ["log", "log", ["TTFT p50", "TTFT p90", "TTFT p99", "TPOT p50", "TPOT p90", "TTFT p90 ≤ 500 ms",
                                  "TPOT p90 ≤ 30 ms"], 2]
    assert page.evaluate("(document.getElementById('serving-latency-chart').layout.annotations || []).length") == 0
    assert page.eval_on_selector_all("#serving-breakdown tbody tr", "rs => rs.length") >= 5
    assert "KV cache" in _text(page, "#serving-notes")
    shot = Path(os.environ.get("ROOFLINE_SCREENSHOT_DIR") or tmp_path) / "serving-web.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 20_000

    # a tighter TPOT target lowers the best concurrency; an empty one is no target, kept in the URL
    _type(page, "#slo-tpot", 9, "slo_tpot_ms=9")
    tighter = page.request.get(base_url_web + "/api/serving?" + page.evaluate("document.body.dataset.query").split("&", 1)[1]).json()
    assert tighter["best_users"] < best and _text(page, "#serving-best") == f"{tighter['best_users']} users"
    _type(page, "#slo-tpot", "", "")
    assert page.evaluate("document.body.dataset.query").endswith("&slo_tpot_ms=")  # no target, said in the URL
    assert "TPOT" not in _text(page, "#serving-best-sub") and page.url.count("slo_tpot_ms=") == 1
    url = page.url
    other = page.context.new_page()
    other.goto(url)
    _wait(other, 0, "view=serving")
    assert other.input_value("#slo-tpot") == "" and _text(other, "#serving-best") == _text(page, "#serving-best")
    other.close()
    # the workload controls reach the API; a bad value names its control
    _type(page, "#max-users", 32, "max_users=32")
    assert page.evaluate("document.getElementById('serving-latency-chart').data[0].x") == [1, 2, 4, 8, 16, 32]
    page.fill("#max-users", "0")
    page.press("#max-users", "Enter")
    page.wait_for_selector("#error:not([hidden])")
    # the control's label and the API's range (app.MAX_USERS = 4,096)
    assert _text(page, "#error").startswith('Concurrent users, up to: "0" is not a whole number from 1 to 4,096.')
    assert page.get_attribute("#max-users", "aria-invalid") == "true"
    _type(page, "#max-users", 16, "max_users=16")
    assert page.is_hidden("#error")
    # back to one layer: its own query, the seed's figure
    before = _renders(page)
    page.click("#view-layer")
    _wait(page, before, "view=layer")
    assert "input_len" not in page.evaluate("document.body.dataset.query")
    assert _text(page, "#total") == "8,756 µs"
    assert errors == []


def test_a_refusal_made_while_a_request_is_out_is_not_cleared_by_its_answer(page, base_url_web):
    """A reviewer typed input tokens 32,768 (a request went out), then at once an output of 40,000
    (refused in the page): the first answer's arrival cleared the refusal and un-greyed results
    drawn for 256 output tokens. The answer is drawn, the refusal and the grey stay. The server is
    slowed so that the answer is surely still out when the refusal is made."""
    import time as _time

    page.set_viewport_size({"width": 1400, "height": 800})
    page.goto(base_url_web + "/?view=serving")
    _wait(page, 0)
    page.route("**/api/serving?*", lambda route: (_time.sleep(0.8), route.continue_()))
    before = _renders(page)
    page.fill("#input-len", "2048")
    page.press("#input-len", "Enter")  # out for 0.8 s at least
    page.fill("#output-len", "40000")
    page.press("#output-len", "Enter")  # refused in the page at once
    assert page.is_visible("#error")
    _wait(page, before, "input_len=2048")  # the earlier answer arrives and is drawn
    assert page.is_visible("#error") and "Output" in _text(page, "#error")
    assert page.evaluate("document.body.dataset.stale") == "1"


def test_the_engines_time_per_step_reaches_the_api_as_the_cli_takes_it(client):
    """step_overhead_ms=2 on the API is --step-overhead 2ms on the CLI: the same points."""
    body = client.get("/api/serving", params={**BASE, "max_users": 2, "step_overhead_ms": 2}).json()
    for users, n, point in zip(body["concurrencies"], body["requests_per_point"], body["points"]):
        cli = _cli_json("serving", "--sweep", str(users), "--requests", str(n), *CLI_BASE, "--step-overhead", "2ms", "--json")
        _close(point, cli["points"][0], f"users {users}")
    assert client.get("/api/serving", params={**BASE, "step_overhead_ms": -1}).status_code == 422


def test_the_web_step_table_counts_the_engines_time_as_the_cli_does(client):
    """With step_overhead_ms the page's decode step lists the engine's time as a row and its title's
    time includes it, as --breakdown's does."""
    body = client.get("/api/serving", params={**BASE, "max_users": 2, "step_overhead_ms": 3}).json()
    b = body["breakdown"]
    engine = [o for o in b["ops"] if o["part"] == "engine"]
    assert len(engine) == 1 and engine[0]["time_s"] == pytest.approx(3e-3)
    assert sum(o["time_s"] for o in b["ops"]) == pytest.approx(b["time_s"], rel=1e-9)


def test_the_serving_schema_states_the_ranges_the_server_enforces(client):
    """Each numeric parameter of /api/serving at its schema bound is never refused for its own value
    (a 200, or a 422 naming the combination it is refused in: memory_fraction 0.001 leaves Llama 3.2
    1B's 2.5 GB of weights no room in 0.08 GB of an H100, and the body's fields say with what), and
    one step outside is a 422 naming the parameter alone (the schema and the library read one bound)."""
    from test_web_api import _schema_bounds

    bounds = _schema_bounds(client, "/api/serving")
    assert {"memory_fraction", "tp", "max_tokens", "input_len", "step_overhead_ms"} <= set(bounds)
    base = {"model": "llama3.2-1b", "max_users": 2, "input_len": 64, "output_len": 8}
    combined = set()
    for name, (low, high, kind) in bounds.items():
        for value in (low, high):
            r = client.get("/api/serving", params={**base, name: value})
            if r.status_code != 200:
                body = r.json()
                assert r.status_code == 422 and body["field"] == name and len(body["fields"]) > 1, (name, value, r.text[:300])
                combined.add(name)
        step = 1 if kind == "integer" else 1e-9 * max(1.0, abs(high))
        for value in (low - (1 if kind == "integer" else 1e-6), high + step):
            r = client.get("/api/serving", params={**base, name: value})
            assert r.status_code == 422 and r.json()["fields"] == [name], (name, value, r.text[:300])
    # tp 64 does not divide 32 heads; a 1-token step under 256 sequences; a thousandth of the memory
    assert combined == {"tp", "max_tokens", "memory_fraction"}


def test_the_engines_points_are_the_clis_on_its_measured_kernels(client):
    """engine=vllm prices as `roofline serving --engine vllm` does: vLLM's measured kernels on an H100 (with its
    fitted time per step), the same points and the same kernel notes; a GPU without tables transfers them."""
    pytest.importorskip("aiconfigurator_core")
    for machine in ("h100-sxm", "mi300x"):
        body = client.get("/api/serving", params={**BASE, "max_users": 4, "engine": "vllm", "machine": machine}).json()
        for users, n, point in zip(body["concurrencies"], body["requests_per_point"], body["points"]):
            cli = _cli_json("serving", "--machine", machine, "--engine", "vllm", "--sweep", str(users), "--requests",
                            str(n), *CLI_BASE, "--json")
            _close(point, cli["points"][0], f"{machine} users {users}")
            assert cli["description"] == body["description"] and cli["notes"] == body["notes"][:len(cli["notes"])]
        assert body["kernels"] == "vllm" and (body["kernels_transferred_from"] == "h200") == (machine == "mi300x")
        assert "--engine vllm" in body["caption"] and "--machine " + machine in body["caption"]
