"""Tests of the experiment runner, its configs and helpers, and of the docs that must run:
the README's set-up commands, the notebooks and the CI script (the README's python blocks:
test_docs_examples.py)."""

import contextlib
import io
import json
import os
import re
import stat
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost import datasets
from jboost import objectives
from experiments import run as runner
from experiments.configs import binary_error, mean_absolute_error, r_squared, staged_metric
from conftest import no_xla_optimisations
from tests import _notebooks

REPO = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------------------------
# The runner, end to end (nested_spheres --smoke needs no data files)
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def smoke_runs(tmp_path_factory):
    """Two in-process runs of ``nested_spheres --smoke`` into separate workdirs."""
    out = []
    for i in range(2):
        workdir = tmp_path_factory.mktemp(f"smoke{i}") / "ns"
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            status = runner.main(["nested_spheres", "--smoke", "--workdir", str(workdir)])
        out.append((status, workdir, stdout.getvalue()))
    return out


def _read(workdir):
    config = json.loads((workdir / "config.json").read_text())
    results = json.loads((workdir / "results.json").read_text())
    lines = (workdir / "metrics.jsonl").read_text().splitlines()
    return config, results, [json.loads(line) for line in lines]


@pytest.mark.slow
def test_smoke_run_writes_config_metrics_results(smoke_runs):
    status, workdir, _ = smoke_runs[0]
    assert status == 0
    config, results, metrics = _read(workdir)
    expected = runner.load_config_module("nested_spheres").get_config(True)
    for key in ("experiment", "seed", "description", "smoke", "command", "git_commit", "jax_version",
                "config"):
        assert key in config, key
    assert config["experiment"] == "nested_spheres" and config["smoke"] is True
    assert config["seed"] == expected["seed"] and config["config"] == expected
    assert config["jax_version"] == jax.__version__
    assert config["command"] == f"python -m experiments.run nested_spheres --smoke --workdir {workdir}"
    assert config["git_commit"] == "unknown" or re.fullmatch(r"[0-9a-f]{40}", config["git_commit"])
    # One metrics line per round, steps 1..n_rounds, both losses' test errors in [0, 1].
    assert [m["step"] for m in metrics] == list(range(1, expected["n_rounds"] + 1))
    for m in metrics:
        for name in ("adaboost_m1", "exponential", "deviance"):
            assert 0 <= m[f"test_error_{name}"] <= 1
    table = results["table"]
    assert len(table) == 6
    for row in table:
        assert set(row) >= set(runner.ROW_KEYS) and isinstance(row["ours"], float)
        assert row["algorithm"] and (row["published"] is None or row["source"])
    assert table[0]["published"] == 0.458 and table[1]["published"] == 0.247
    assert table[0]["source"] == table[1]["source"] == "ESL 2nd ed., Sec. 10.1 / Fig. 10.2"
    assert "depth-wise tree" in table[5]["algorithm"] and table[5]["published"] == 0.247
    # The table's boosted-stumps numbers are the last logged round; boosting beats one stump.
    # Every row names its algorithm (issue 21); the smoke run's 40 rounds carry no book number
    # (the book's 5.8% is at 400).
    assert "AdaBoost.M1" in table[2]["algorithm"] and "Gentle" in table[3]["algorithm"]
    assert "LogitBoost" in table[4]["algorithm"] and table[2]["published"] is None
    assert table[2]["ours"] == pytest.approx(metrics[-1]["test_error_adaboost_m1"])
    assert table[3]["ours"] == pytest.approx(metrics[-1]["test_error_exponential"])
    assert table[4]["ours"] == pytest.approx(metrics[-1]["test_error_deviance"])
    assert table[0]["ours"] == pytest.approx(metrics[0]["test_error_deviance"])
    assert max(table[3]["ours"], table[4]["ours"]) < table[0]["ours"] - 0.1
    assert results["checks"]["boosting_beats_single_stump"] is True
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert results["figures"] == []
    else:
        assert results["figures"] == ["test_error_vs_iterations.png"]
        png = (workdir / "test_error_vs_iterations.png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_smoke_numbers_match_a_separate_fit(smoke_runs):
    # Recompute the boosted-stumps row from the config with plain fit + predict_class.
    _, workdir, _ = smoke_runs[0]
    config, results, _ = _read(workdir)
    cfg = config["config"]
    X, y = datasets.nested_spheres(cfg["n_train"], seed=cfg["seed"])
    Xt, yt = datasets.nested_spheres(cfg["n_test"], seed=cfg["seed"] + 1)
    model = jboost.fit(X, y, "exponential", n_rounds=cfg["n_rounds"], depth=1,
                       learning_rate=cfg["learning_rate"], l2=cfg["l2"],
                       min_child_weight=cfg["min_child_weight"], key=cfg["seed"])
    error = np.mean(np.asarray(jboost.predict_class(model, Xt)) != yt)
    assert results["table"][3]["ours"] == pytest.approx(error, abs=1e-7)
    m1 = jboost.algorithms.adaboost_m1(X, y, n_rounds=cfg["n_rounds"], depth=1,
                                       learning_rate=cfg["learning_rate"], key=cfg["seed"])
    error = np.mean(np.asarray(jboost.predict_class(m1, Xt)) != yt)
    assert results["table"][2]["ours"] == pytest.approx(error, abs=1e-7)
    free = jboost.fit(X, y, "binomial_deviance", n_rounds=1, depth=cfg["single_depthwise_depth"],
                      tree_family="depthwise", learning_rate=cfg["learning_rate"], l2=cfg["l2"],
                      key=cfg["seed"])
    error = np.mean(np.asarray(jboost.predict_class(free, Xt)) != yt)
    assert results["table"][5]["ours"] == pytest.approx(error, abs=1e-7)


def test_two_runs_give_identical_numbers(smoke_runs):
    (_, w1, _), (_, w2, _) = smoke_runs
    _, r1, m1 = _read(w1)
    _, r2, m2 = _read(w2)
    assert r1["table"] == r2["table"]
    assert m1 == m2
    assert r1["min_test_error"] == r2["min_test_error"]


def test_runner_prints_the_table(smoke_runs):
    out = smoke_runs[0][2]
    header = next(line for line in out.splitlines() if line.startswith("quantity"))
    assert [c.strip() for c in header.split("|")] == ["quantity", "algorithm", "published", "ours"]
    assert "single stump: test error" in out and "0.458" in out
    assert "published: ESL 2nd ed., Sec. 10.1 / Fig. 10.2" in out


def test_unknown_experiment_lists_the_available_ones(capsys):
    assert runner.main(["no_such_experiment"]) == 2
    err = capsys.readouterr().err
    assert "no_such_experiment" in err
    for name in ("nested_spheres", "spam", "california_huber"):
        assert name in err
    with pytest.raises(ValueError, match="available experiments: .*nested_spheres"):
        runner.load_config_module("no_such_experiment")


def test_missing_data_is_reported_cleanly(tmp_path, capsys):
    empty = tmp_path / "no_data_here"
    empty.mkdir()
    status = runner.main(["spam", "--smoke", "--data-dir", str(empty), "--workdir", str(tmp_path / "w")])
    assert status == 1
    captured = capsys.readouterr()
    assert "JBOOST_DATA_DIR" in captured.err and "spambase.csv.gz" in captured.err
    assert str(empty) in captured.err
    assert "Traceback" not in captured.err + captured.out


@pytest.mark.parametrize("name", runner.available_experiments())
def test_every_config_follows_the_contract(name):
    module = runner.load_config_module(name)
    assert callable(module.run)
    for smoke in (False, True):
        config = module.get_config(smoke)
        assert isinstance(config["seed"], int) and config["description"]
        assert json.loads(json.dumps(config)) == config


def test_default_workdir():
    assert runner.default_workdir("spam", False) == Path("runs/spam")
    assert runner.default_workdir("spam", True) == Path("runs/spam-smoke")


def _row(**kw):
    row = {"quantity": "a", "algorithm": "gradient boosting, stumps", "published": None, "source": None,
           "ours": 0.12345}
    row.update(kw)
    return row


def test_format_and_check_table():
    rows = [_row(), _row(quantity="longer name", published=0.5, source="ESL 2nd ed., Sec. 10.8", ours=2)]
    lines = runner.format_table(rows).splitlines()
    assert lines[0].split("|")[0].strip() == "quantity" and lines[0].split("|")[1].strip() == "algorithm"
    assert lines[2].split("|")[2].strip() == "-" and lines[2].split("|")[3].strip() == "0.1235"
    assert len({len(line) for line in lines[:-1]}) == 1  # aligned columns
    assert lines[-1] == "published: ESL 2nd ed., Sec. 10.8"
    runner.check_table(rows, "x")
    with pytest.raises(ValueError, match="quantity, algorithm, published, source, ours"):
        runner.check_table([{"quantity": "a", "published": None, "ours": 1.0}], "x")
    with pytest.raises(ValueError, match="non-empty list"):
        runner.check_table([], "x")
    # Issue 21: every row names its algorithm, every published number its source.
    for bad in (_row(algorithm=""), _row(algorithm=None), _row(algorithm="  ")):
        with pytest.raises(ValueError, match="names no algorithm"):
            runner.check_table([bad], "x")
    for bad in (_row(published=0.058), _row(published="> 0", source=""), _row(published=1, source=None)):
        with pytest.raises(ValueError, match="without a source"):
            runner.check_table([rows[0], bad], "x")


def test_to_jsonable_converts_arrays_and_scalars():
    obj = {"a": jnp.float32(0.5), "b": np.arange(3), "c": (np.int64(2), True, None), "d": Path("p")}
    assert runner.to_jsonable(obj) == {"a": 0.5, "b": [0, 1, 2], "c": [2, True, None], "d": "p"}


# --------------------------------------------------------------------------------------------
# --all: one process, one results file, the README's tables rendered from it (issue 21)
# --------------------------------------------------------------------------------------------

# ``--all --smoke`` over every config takes minutes (about 290 s on 2 cores, 18 configs), too long
# for the suite: the tests run a subset: nested_spheres (no data file; its programs are compiled
# by ``smoke_runs``), california_interpretation (data; the interpretation test below checks the
# results of this run) and spam with an empty data directory (skipped before any fit).
ALL_SUBSET = ("nested_spheres", "california_interpretation")
HAVE_DATA = (datasets.data_dir() / "california_housing.csv.gz").exists()


def _check_rows(results):
    """Every row of every table that ran names its algorithm, every published number a source."""
    for name, entry in results["experiments"].items():
        if entry["status"] == "ok":
            runner.check_table(entry["table"], name)
            for row in entry["table"]:
                assert row["algorithm"].strip(), (name, row)
                assert row["published"] is None or row["source"].strip(), (name, row)


@pytest.fixture(scope="module")
def all_run(tmp_path_factory, smoke_runs):
    """``--all --smoke`` on :data:`ALL_SUBSET`, with the data directory found as the runner finds
    it (``JBOOST_DATA_DIR``, then ``../shared/data``), writing a README with the markers."""
    root = tmp_path_factory.mktemp("all")
    readme = root / "README.md"
    readme.write_text(f"# prose\n\nkept\n\n{runner.README_BEGIN}\nstale\n{runner.README_END}\n\nafter\n")
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        status = runner.main(["--all", "--smoke", "--only", ",".join(ALL_SUBSET), "--workdir-root",
                              str(root / "runs"), "--write-readme", str(readme)])
    return status, root, readme, stdout.getvalue()


def test_all_runs_the_configs_into_one_results_file(all_run, smoke_runs):
    status, root, readme, out = all_run
    assert status == 0
    results = json.loads((root / "runs" / "results.json").read_text())
    assert list(results["experiments"]) == list(ALL_SUBSET)
    for key in ("git_commit", "git_dirty", "date", "jax_version", "python_version", "platform",
                "total_wall_time_s", "command"):
        assert key in results, key
    assert results["jax_version"] == jax.__version__ and results["smoke"] is True
    assert results["command"].startswith("python -m experiments.run --all --smoke --only")
    ns = results["experiments"]["nested_spheres"]
    assert ns["status"] == "ok" and ns["wall_time_s"] > 0
    assert ns["figures"] == ["test_error_vs_iterations.png"] or not ns["figures"]
    assert (root / "runs" / "nested_spheres-smoke" / "results.json").exists()
    ci = results["experiments"]["california_interpretation"]
    assert ci["status"] == ("ok" if HAVE_DATA else "skipped")
    _check_rows(results)
    assert f"{2 if HAVE_DATA else 1} of 2 experiments ran" in out
    # The table --all records is the single-config run's (same seed, same programs).
    _, single, _ = _read(smoke_runs[0][1])
    assert ns["table"] == single["table"]


def test_readme_is_rendered_from_the_results_file_and_round_trips(all_run, tmp_path):
    _, root, readme, _ = all_run
    text = readme.read_text()
    results = json.loads((root / "runs" / "results.json").read_text())
    # The prose outside the markers stays; the section between them is the rendering.
    assert text.startswith("# prose\n\nkept\n\n" + runner.README_BEGIN + "\n")
    assert text.endswith(runner.README_END + "\n\nafter\n") and "stale" not in text
    assert runner.render_results(results) in text
    assert json.loads((readme.parent / "results.json").read_text()) == results
    assert results["git_commit"][:12] in text and "smoke sizes" in text
    for row in results["experiments"]["nested_spheres"]["table"]:
        assert row["algorithm"] in text
    # Regenerating from the copied results file gives the same bytes (through the CLI too).
    again = tmp_path / "README.md"
    again.write_text(text)
    with contextlib.redirect_stdout(io.StringIO()):
        assert runner.main(["--readme-from", str(readme.parent / "results.json"), "--write-readme",
                            str(again)]) == 0
    assert again.read_bytes() == readme.read_bytes()


def test_all_reports_missing_data_as_skipped(tmp_path, capsys):
    empty = tmp_path / "no_data_here"
    empty.mkdir()
    status = runner.main(["--all", "--smoke", "--only", "spam", "--data-dir", str(empty),
                          "--workdir-root", str(tmp_path / "runs")])
    assert status == 0  # skipped is not failed
    results = json.loads((tmp_path / "runs" / "results.json").read_text())
    entry = results["experiments"]["spam"]
    assert entry["status"] == "skipped" and str(empty) in entry["reason"]
    assert "spambase.csv.gz" in entry["reason"] and "table" not in entry
    section = runner.render_results(results)
    assert "Not run at this commit: `spam` (skipped:" in section and "**skipped**" in section
    assert "spam: skipped" in capsys.readouterr().err
    # CI's run (.ci/run, test_ci_script_installs_and_runs_the_readme_test_command) requires the
    # data: a skipped experiment fails it.
    assert runner.main(["--all", "--smoke", "--only", "spam", "--data-dir", str(empty),
                        "--workdir-root", str(tmp_path / "runs2"), "--require-data"]) == 1
    assert "spam: skipped" in capsys.readouterr().err


def test_committed_readme_tables_are_the_committed_results_file():
    """experiments/README.md's results section is exactly the rendering of experiments/results.json,
    a full-size run (not smoke) from a clean commit that covers every config, each row naming its
    algorithm and each published number its source (issue 21: no hand-edited numbers)."""
    results = json.loads((REPO / "experiments" / "results.json").read_text())
    readme = (REPO / "experiments" / "README.md").read_text()
    assert runner.splice_readme(readme, runner.render_results(results)) == readme, (
        "experiments/README.md's results section is not the rendering of experiments/results.json: "
        "rerun python -m experiments.run --all --write-readme (or --readme-from)")
    assert results["smoke"] is False and results["git_dirty"] is False
    assert re.fullmatch(r"[0-9a-f]{40}", results["git_commit"])
    missing = set(runner.available_experiments()) - set(results["planned"])
    assert not missing, f"configs not in the committed run: {sorted(missing)}; rerun --all"
    _check_rows(results)


def test_all_usage_errors(capsys):
    assert runner.main(["nested_spheres", "--write-readme"]) == 2
    assert "--write-readme needs --all" in capsys.readouterr().err
    assert runner.main(["--all", "--smoke", "--write-readme"]) == 2
    assert "--smoke numbers are a pipeline check" in capsys.readouterr().err
    assert runner.main([]) == 2 and runner.main(["--all", "nested_spheres"]) == 2
    assert runner.main(["--all", "--only", "nested_spheres,nope"]) == 2
    assert "'nope'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="markers"):
        runner.splice_readme("no markers here", "x")


# --------------------------------------------------------------------------------------------
# Helpers: staged metrics against staged predict
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stump_model():
    """Shapes and static settings of ``nested_spheres --smoke``, so its compiled fit is reused."""
    X, y = datasets.nested_spheres(500, seed=5)
    Xt, yt = datasets.nested_spheres(300, seed=6)
    model = jboost.fit(X, y, "binomial_deviance", n_rounds=40, depth=1, learning_rate=0.5, l2=0.0,
                       min_child_weight=0.0)
    return model, Xt, yt


def test_staged_metric_matches_predict(stump_model):
    model, Xt, yt = stump_model
    raws = staged_metric(model, Xt, yt, _raw_metric)
    errors = staged_metric(model, Xt, yt, binary_error)
    assert raws.shape == (40, 300, 1) and errors.shape == (40,)
    for m in (1, 40):
        ref = np.asarray(jboost.predict(model, Xt, n_rounds=m))
        np.testing.assert_allclose(raws[m - 1, :, 0], ref, rtol=0, atol=1e-6)
        ref_err = np.mean(np.asarray(jboost.predict_class(model, Xt, n_rounds=m)) != yt)
        assert errors[m - 1] == pytest.approx(ref_err, abs=1e-7)
    # The error curve is the error of the summed raw scores, round by round.
    np.testing.assert_allclose(errors, np.mean((raws[:, :, 0] > 0) != (yt > 0.5), axis=1), atol=1e-7)
    assert errors[-1] < errors[0] - 0.1


def test_staged_metric_with_several_trees_per_round(stump_model):
    # Regroup the 40 rounds of one tree as 10 rounds of 4 trees (as with per-output trees):
    # staged round r must then be the first 4 r trees of the original model.
    model, Xt, yt = stump_model
    grouped = model._replace(trees=jax.tree_util.tree_map(
        lambda a: a.reshape((10, 4) + a.shape[2:]), model.trees))
    assert grouped.trees.leaf_values.shape[:2] == (10, 4)
    raws = staged_metric(grouped, Xt, yt, _raw_metric)
    assert raws.shape == (10, 300, 1)
    flat = staged_metric(model, Xt, yt, _raw_metric)
    np.testing.assert_allclose(raws, flat[3::4], rtol=0, atol=1e-6)
    np.testing.assert_allclose(raws[-1, :, 0], np.asarray(jboost.predict(grouped, Xt)), rtol=0, atol=1e-6)


def _raw_metric(y, raw):
    return raw


def test_mean_absolute_error_and_r_squared_by_hand():
    y = jnp.array([1.0, 2.0, 4.0])
    raw = jnp.array([[1.5], [2.0], [3.0]])
    assert float(mean_absolute_error(y, raw)) == pytest.approx((0.5 + 0 + 1) / 3)
    # RSS = 0.25 + 0 + 1 = 1.25; TSS = sum (y - 7/3)^2 = 42/9.
    assert r_squared(y, raw[:, 0]) == pytest.approx(1 - 1.25 / (42 / 9))


# --------------------------------------------------------------------------------------------
# Docs that must run: README, notebook, CI script
# --------------------------------------------------------------------------------------------


def test_readme_commands_are_the_ones_that_run(tmp_path):
    """The README's set-up is its first code block, two commands, and each does what it says: the
    extras it installs exist, the main job is an experiment of the runner that needs no data files
    (run here without a data directory: it succeeds), and the test command is the one CI runs."""
    import tomllib
    text = (REPO / "README.md").read_text()
    first_block = re.search(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M)
    commands = [c for c in first_block.group(2).splitlines() if c.strip()]
    assert first_block.group(1) == "bash" and len(commands) == 2
    (install_job, job), (install_tests, tests) = (c.split(" && ") for c in commands)
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for install in (install_job, install_tests):
        named = re.fullmatch(r'pip install -e "\.\[([\w,]+)\]"', install).group(1).split(",")
        assert set(named) <= set(extras), (install, sorted(extras))
    name = re.fullmatch(r"python -m experiments\.run (\w+)", job).group(1)
    assert name in runner.available_experiments()
    with contextlib.redirect_stdout(io.StringIO()):
        status = runner.main([name, "--smoke", "--workdir", str(tmp_path / "w"),
                              "--data-dir", str(tmp_path / "no_data")])
    assert status == 0
    ci = [line for line in (REPO / ".ci" / "run").read_text().splitlines() if line.startswith("python")]
    assert ci[:2] == [f"python -m {install_tests}", tests]  # then the peers' smoke check (below)


def test_readme_docs_command_is_the_one_ci_runs():
    """The README's command that builds the documentation site installs an extra that exists and
    builds with warnings as errors, as .ci/run does (then serves the site)."""
    import tomllib
    text = (REPO / "README.md").read_text()
    command = next(line for block in re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M)
                   for line in block.splitlines() if "sphinx" in line)
    install, build, serve = command.split(" && ")
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert re.fullmatch(r'pip install -e "\.\[docs\]"', install) and "docs" in extras
    assert " -W " in build and build.endswith("docs docs/_build/html")
    assert serve.startswith("python -m http.server -d docs/_build/html")
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert f"python -m {install}" in ci and build in ci


def _run_notebook(name: str) -> dict:
    """Check ``notebooks/<name>`` is an nbformat-4 notebook (unique cell ids) committed executed,
    run its code cells in order in one namespace (tests/_notebooks.py) and check its committed
    outputs are the ones they give (printed lines up to their numbers, figures per cell:
    ``python -m tests._notebooks`` rewrites them); return the namespace."""
    nb = json.loads((REPO / "notebooks" / name).read_text())
    assert nb["nbformat"] == 4 and nb["nbformat_minor"] >= 4
    assert "kernelspec" in nb["metadata"]
    ids = [c["id"] for c in nb["cells"]]
    assert len(set(ids)) == len(ids)
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert len(code) >= 4
    for cell in nb["cells"]:
        assert cell["cell_type"] in ("markdown", "code") and isinstance(cell["source"], list)
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1)), \
        f"{name} is not committed executed: python -m tests._notebooks notebooks/{name}"
    # small programs: compile time is the notebook's time
    namespace, outputs = _notebooks.execute(nb, name, wrap=no_xla_optimisations)
    stale = _notebooks.same_outputs(nb, outputs)
    assert stale is None, (f"{name}'s committed outputs are not what its code gives ({stale}): "
                           f"rewrite them, python -m tests._notebooks notebooks/{name}")
    return namespace


@pytest.mark.slow
def test_quickstart_notebook_is_valid_and_runs():
    namespace = _run_notebook("quickstart.ipynb")
    assert namespace["sweep"].valid_loss.shape == (3, 50)
    assert "pseudo_huber" in namespace


@pytest.mark.slow
def test_custom_losses_notebook_is_valid_and_runs():
    """Issue 16 part 6: a focal loss vmapped over gamma, a distributional model with intervals,
    a Cox model and a ranking model, each a few lines; their held-out figures are sane."""
    ns = _run_notebook("custom_losses.ipynb")
    assert ns["errors"].shape == (4,) and float(ns["errors"].max()) < 0.2
    assert 0.8 < float(ns["inside"].mean()) < 0.97
    narrow, wide, lo, hi = ns["narrow"], ns["wide"], ns["lo"], ns["hi"]
    assert np.mean((hi - lo)[wide]) > 2 * np.mean((hi - lo)[narrow])     # heteroscedastic
    assert objectives.concordance_index(ns["y_surv"][1500:], ns["risk"]) > 0.7
    assert objectives.ndcg(ns["y_rank"][~ns["train"]], ns["scores"], k=10) > 0.85


@pytest.mark.skipif(not (datasets.data_dir() / "california_housing.csv.gz").exists(),
                    reason="the shared data sets are not beside the clone (CI has them)")
def test_interpretation_notebook_is_valid_and_runs():
    """Issue 18: importance, partial dependence and SHAP on California housing, plots drawn."""
    ns = _run_notebook("interpretation.ipynb")
    assert ns["names"][int(np.argmax(ns["relative"]))] == "MedInc"
    assert ns["gap"] < 1e-3 and ns["values"][-1] > ns["values"][0]
    ns["plt"].close("all")


def test_ci_script_installs_and_runs_the_readme_test_command():
    path = REPO / ".ci" / "run"
    text = path.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in text
    assert os.stat(path).st_mode & stat.S_IXUSR
    lines = [line.strip() for line in text.splitlines()]
    i = lines.index('python -m pip install -e ".[test]"')
    assert lines.index("python -m pytest") > i
    # Issue 47: after the tests, the bench extra's peers at the index's newest releases, every
    # experiment and every benchmark script at its smallest size with them; the experiments'
    # outputs in a temporary directory, not in the clone.
    order = [lines.index("python -m pytest"), lines.index('python -m pip install -e ".[bench]"'),
             lines.index('runs="$(mktemp -d)"'),
             lines.index('python -m experiments.run --all --smoke --require-data '
                         '--data-dir ../shared/data --workdir-root "$runs"'),
             lines.index("python -m benchmarks.smoke --data-dir ../shared/data")]
    assert order == sorted(order)
    assert [line for line in lines if line.startswith("python")][-1].startswith("python -m benchmarks")


def test_benchmark_smoke_lists_every_script_and_the_bench_peers():
    """Issue 47: ``python -m benchmarks.smoke`` (CI) runs every benchmark script with ``--smoke``:
    a new ``benchmarks/*.py`` script missing from its list fails here; every listed script takes
    ``--smoke`` (and ``--data-dir`` where the list says so); the peers whose import it checks are
    the ``bench`` extra's."""
    import tomllib

    from benchmarks import smoke
    scripts = {p.stem for p in (REPO / "benchmarks").glob("*.py")
               if not p.stem.startswith("_")} - {"smoke"}  # _name: a module the scripts share
    assert sorted(smoke.SCRIPTS) == sorted(scripts)
    for name, takes_data_dir in smoke.SCRIPTS.items():
        text = (REPO / "benchmarks" / f"{name}.py").read_text()
        assert '"--smoke"' in text, name
        assert ('"--data-dir"' in text) == takes_data_dir, name
    bench = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["bench"]
    assert sorted(smoke.PEERS) == sorted(re.match(r"[\w.-]+", req).group(0) for req in bench)


def test_benchmark_smoke_runs_each_script_alone_and_reports_failures(tmp_path, monkeypatch, capsys):
    """Each script runs as ``<script> --smoke [--data-dir D]`` in its own process, in a temporary
    directory, with this checkout on ``PYTHONPATH`` and ``JBOOST_DATA_DIR``; a non-zero exit, a
    time-out and a peer that does not import are failures (exit status 1), with stderr's tail."""
    from benchmarks import smoke
    (tmp_path / "good.py").write_text(
        "import os, sys\n"
        "assert sys.argv[1:] == ['--smoke', '--data-dir', 'D'], sys.argv\n"
        "assert os.environ['JBOOST_DATA_DIR'] == 'D'\n"
        f"assert os.environ['PYTHONPATH'].split(os.pathsep)[0] == {str(REPO)!r}\n"
        f"assert not os.getcwd().startswith({str(REPO)!r})\n"
        "open('written.txt', 'w').write('x')\n"
        "print('the table')\n")
    (tmp_path / "bad.py").write_text("import sys\nprint('boom', file=sys.stderr)\nsys.exit(3)\n")
    (tmp_path / "slow.py").write_text("import time\ntime.sleep(60)\n")
    good = smoke.run_script("good", data_dir="D", scripts_dir=tmp_path, takes_data_dir=True)
    assert (good.status, good.stdout, good.stderr) == ("ok", "the table\n", "")
    bad = smoke.run_script("bad", data_dir="D", scripts_dir=tmp_path, takes_data_dir=False)
    assert (bad.status, bad.returncode) == ("FAILED", 3)
    smoke.report(bad)
    assert "boom" in capsys.readouterr().out
    assert smoke.run_script("slow", scripts_dir=tmp_path, timeout=1).status == "TIMEOUT"
    assert smoke.check_peers({"no-such-peer": "jboost_no_such_module"})["no-such-peer"].startswith(
        "NOT IMPORTABLE")

    ran = []
    monkeypatch.setattr(smoke, "run_script", lambda name, **kw: ran.append((name, kw)) or
                        smoke.Result(name, "ok", 0.1, 0, "", ""))
    monkeypatch.setattr(smoke, "check_peers", lambda: {"xgboost": "3.2.0"})
    assert smoke.main(["bench", "shap_bench", "--data-dir", str(tmp_path)]) == 0
    assert [(n, kw["data_dir"]) for n, kw in ran] == [("bench", str(tmp_path)), ("shap_bench", str(tmp_path))]
    monkeypatch.setattr(smoke, "check_peers", lambda: {"xgboost": "NOT IMPORTABLE: ImportError"})
    assert smoke.main(["bench"]) == 1
    assert smoke.main(["no_such_script"]) == 2
    assert "2 of 2 benchmark scripts ran" in capsys.readouterr().out


@pytest.mark.skipif(not (datasets.data_dir() / "spambase.csv.gz").exists(),
                    reason="the shared data sets are not beside the clone (CI has them)")
@pytest.mark.parametrize("name", ["california_interpretation", "spam_interpretation"])
def test_interpretation_experiments_run_and_agree_with_the_book(name, tmp_path, request):
    # Issue 18 part 5: ESL Figures 10.6-10.8 and 10.14-10.16, smoke size: the directions the book
    # describes hold (MedInc first and increasing, AveOccup decreasing; spam's ! and remove
    # raise the log-odds, edu and hp lower it) and the figures are written. An experiment that
    # ``all_run`` ran (the same --smoke run, into its own workdir) is read from there.
    if name in ALL_SUBSET:
        _, root, _, _ = request.getfixturevalue("all_run")
        workdir = root / "runs" / f"{name}-smoke"
        assert json.loads((root / "runs" / "results.json").read_text())["experiments"][name]["status"] == "ok"
    else:
        workdir = tmp_path / name
        with contextlib.redirect_stdout(io.StringIO()):
            status = runner.main([name, "--smoke", "--workdir", str(workdir)])
        assert status == 0
    results = json.loads((workdir / "results.json").read_text())
    assert all(results["checks"].values()), results["checks"]
    assert {"relative_importance.png", "partial_dependence.png"} <= set(results["figures"])


def test_multiclass_table_cart_is_scikit_learns_gini_tree():
    """The protocol's CART (the first SAMME tree of a depth-wise family) is scikit-learn's
    ``DecisionTreeClassifier(max_depth=d)``: the plurality tree's Newton gain is K times the Gini
    decrease. Integer features of 10 values bin exactly, so every test row goes the same way."""
    pytest.importorskip("sklearn")
    from sklearn.tree import DecisionTreeClassifier
    from experiments.configs import multiclass_table

    rng = np.random.default_rng(3)
    X = rng.integers(0, 10, size=(400, 4)).astype(np.float32)
    y = ((X[:, 0] > 4).astype(int) + (X[:, 1] > 6) + (rng.random(400) < 0.15)) % 3
    Xt = rng.integers(0, 10, size=(300, 4)).astype(np.float32)
    for depth in (1, 2, 3):
        ours = jboost.predict_class(multiclass_table._fit("SAMME", X, y, 3, depth, 1, 256, 0), Xt)
        theirs = DecisionTreeClassifier(max_depth=depth, random_state=0).fit(X, y).predict(Xt)
        assert np.array_equal(np.asarray(ours), theirs), depth


def test_multiclass_table_cv_counts_each_held_out_row_once_and_picks_the_least_error(monkeypatch):
    """``cv_error`` is the held-out misclassification rate over all folds (fold sizes differ);
    ``choose_depth`` takes the depth of least CV error, the smaller of ties, reading only the
    rows it is given."""
    from experiments.configs import multiclass_table as mt

    X, y = datasets.waveform(97, seed=1)
    fold = jboost.sweep.fold_ids(y, 5, seed=0, stratified=True)
    wrong = 0
    for f in range(5):
        model = jboost.algorithms.samme(X[fold != f], y[fold != f], n_classes=3, n_rounds=4,
                                        depth=2, tree_family="depthwise", key=0)
        wrong += int(np.sum(np.asarray(jboost.predict_class(model, X[fold == f])) != y[fold == f]))
    assert mt.cv_error("SAMME", X, y, 3, 2, 4, 256, fold, 0) == pytest.approx(wrong / 97)

    seen = []
    fake = {1: 0.3, 2: 0.2, 3: 0.2, 4: 0.25}
    monkeypatch.setattr(mt, "cv_error", lambda method, X_, y_, k, d, *a: seen.append(len(y_)) or fake[d])
    assert mt.choose_depth("SAMME", X, y, 3, [1, 2, 3, 4], 4, 256, 5, 0) == (2, fake)
    assert seen == [97] * 4


def test_multiclass_table_published_numbers_are_the_preprints():
    """Fractions and standard errors as ../shared/published/samme_2006.md transcribes Tables 1
    and 3; other iteration counts (the smoke run's) have no published number."""
    from experiments.configs import multiclass_table as mt

    paper = [200, 400, 600]
    assert mt._published("letter", "SAMME", 600, paper) == pytest.approx((0.023, 0.002))
    assert mt._published("vowel", "SAMME_R", 400, paper) == pytest.approx((0.463, 0.023))
    assert mt._published("waveform", "CART", None, paper) == pytest.approx((0.284, 0.018))
    assert mt._published("segmentation", "SAMME", 20, [10, 20]) == (None, None)
    assert mt.SOURCE.format(mt.PUBLISHED["waveform"]["table"]).endswith("Table 1")


def test_notebook_sync_check_masks_numbers_and_catches_stale_outputs():
    """The committed outputs are compared with the executed ones up to their numbers (last digits
    differ between machines): other printed words, or a figure more or less, are stale."""
    nb = json.loads((REPO / "notebooks" / "quickstart.ipynb").read_text())
    committed = [c["outputs"] for c in nb["cells"] if c["cell_type"] == "code"]
    assert any(committed) and _notebooks.same_outputs(nb, committed) is None
    renumbered = json.loads(json.dumps(committed).replace("0.", "9."))
    assert _notebooks.same_outputs(nb, renumbered) is None
    i = next(k for k, out in enumerate(committed) if out)
    reworded = json.loads(json.dumps(committed))
    reworded[i][0]["text"] = ["something else\n"]
    assert "code cell" in _notebooks.same_outputs(nb, reworded)
    extra_figure = json.loads(json.dumps(committed))
    extra_figure[i].append({"output_type": "display_data", "data": {}, "metadata": {}})
    assert _notebooks.same_outputs(nb, extra_figure) is not None


@pytest.mark.skipif(not (datasets.data_dir() / "adult_train.csv.gz").exists(),
                    reason="the shared data sets are not beside the clone (CI has them)")
def test_adult_peers_get_categories_from_pandas_3_strings():
    """Issue 47: pandas 3 reads string columns with its ``str`` dtype (not ``object``); the
    peers' data preparation (benchmarks/adult_categorical.py) must still turn them into
    categoricals, or CatBoost receives strings without ``cat_features``. pandas 2 behaves as
    pandas 3 with ``future.infer_string``; both are checked."""
    import importlib.util
    pd = pytest.importorskip("pandas")
    spec = importlib.util.spec_from_file_location("adult_bench",
                                                  REPO / "benchmarks" / "adult_categorical.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    pandas_3 = int(pd.__version__.split(".")[0]) >= 3
    for infer in ([None] if pandas_3 else [False, True]):
        with (contextlib.nullcontext() if pandas_3
              else pd.option_context("future.infer_string", infer)):
            X, y, Xt, yt = bench.load_adult_frames()
        kinds = {c: ("category" if isinstance(X[c].dtype, pd.CategoricalDtype)
                     else "number" if pd.api.types.is_numeric_dtype(X[c].dtype) else str(X[c].dtype))
                 for c in X.columns}
        assert sorted(set(kinds.values())) == ["category", "number"], (infer, kinds)
        assert sum(k == "category" for k in kinds.values()) == 8


def test_results_record_every_package_version():
    """Issue 47: a results file records the version of jboost's dependencies and of every peer
    (``None`` when not installed), and the constraints file pins the ones a rerun can use."""
    packages = runner.run_provenance("cmd", True, None)["packages"]
    assert set(packages) == set(runner.PACKAGES)
    assert packages["jax"] == jax.__version__ and packages["numpy"] == np.__version__
    pinned = (REPO / "experiments" / "constraints.txt").read_text()
    for name in ("jax", "jaxlib", "numpy", "pandas", "scikit-learn", "xgboost", "lightgbm"):
        assert re.search(rf"^{name}==\S+$", pinned, flags=re.M), name
