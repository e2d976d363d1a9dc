"""Bounded autotuning (`emit_triton.autotune`): which configurations, the choice, the record, the data.

Timing is injected (a timer that returns a cost per configuration), and the trials run under Triton's
interpreter with `force=True`: what is checked is the mechanism, never a wall-clock number.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import intent
from emit_triton import autotune, launcher, targets
from emit_triton.autotune import Config, configurations
from emit_triton.cache import DiskCache
from intent import InOut, Out, dims, f32, parallel
from tests.launch_fixtures import isolated_cache  # noqa: F401  (fixture)

M, N = dims("M N")


@intent.kernel
def accumulate(x: f32[M, N], acc: InOut[f32[M]], out: Out[f32[M, N]]):
    for i in parallel(M):
        acc[i] = acc[i] + intent.sum(x[i, :])
        out[i, :] = x[i, :] * 2.0


def _args(m: int = 5, n: int = 7) -> dict:
    rng = np.random.default_rng(0)
    return {"x": torch.tensor(rng.standard_normal((m, n)), dtype=torch.float32),
            "acc": torch.tensor(rng.standard_normal(m), dtype=torch.float32), "out": torch.zeros(m, n)}


class CostTimer:
    """Each configuration costs what `costs` says (else 1.0); runs every trial for real, counts calls."""

    def __init__(self, costs: dict[Config, float], fail: tuple[Config, ...] = ()) -> None:
        self.costs, self.fail, self.calls = costs, fail, []

    def __call__(self, reset, run) -> float:
        reset()
        run()
        config = self.current
        self.calls.append(config)
        if config in self.fail:
            raise RuntimeError("out of resources")
        return self.costs.get(config, 1.0)


def _tune(args: dict, timer, disk: DiskCache, force: bool = True):
    kernel = accumulate.specialize(args)
    plan = launcher.plan_launch(kernel, args, materialise=True)
    target = targets.target_for(plan.bound.device)
    fn = plan.function(target.mode)
    configs = iter(configurations(plan.keywords["num_warps"], plan.keywords["num_stages"]))

    def timed(reset, run):
        timer.current = next(configs)
        return timer(reset, run)

    best, trials = autotune.tune(kernel, plan.emitted, plan.key, fn, target, plan.grid, plan.positional,
                                 plan.keywords, timer=timed, disk=disk, force=force)
    return plan, best, trials


@pytest.fixture(autouse=True)
def _fresh_choices():
    autotune.forget()
    yield
    autotune.forget()


def test_a_handful_of_configurations_around_the_model():
    assert configurations(4, 2) == [Config(4, 2), Config(2, 2), Config(8, 2), Config(4, 3), Config(2, 3),
                                    Config(8, 3)]
    assert configurations(1, 2) == [Config(1, 2), Config(2, 2), Config(1, 3), Config(2, 3)]
    assert configurations(32, 3) == [Config(32, 3), Config(16, 3), Config(32, 4), Config(16, 4)]
    assert all(len(configurations(w, s)) <= autotune.MAX_CONFIGS for w in (1, 2, 4, 8, 16, 32) for s in (1, 2, 3))


def test_the_fastest_configuration_wins_and_the_callers_data_is_untouched(isolated_cache):  # noqa: F811
    args = _args()
    before = {k: v.clone() for k, v in args.items()}
    timer = CostTimer({Config(8, 3): 0.25, Config(2, 2): 0.5})
    plan, best, trials = _tune(args, timer, DiskCache(isolated_cache))
    assert best == Config(8, 3)
    assert [c for c, _ in trials] == configurations(plan.keywords["num_warps"], plan.keywords["num_stages"])
    for name in ("x", "acc"):  # six trials ran, each on copies: the in-out accumulator is as it was
        assert torch.equal(args[name], before[name]), name


def test_the_real_launch_sees_the_callers_values(isolated_cache):  # noqa: F811
    args = _args()
    seen = []

    def record(reset, run):
        reset()
        run()
        seen.append(None)
        return 1.0

    kernel = accumulate.specialize(args)
    plan = launcher.plan_launch(kernel, args, materialise=True)
    target = targets.target_for(plan.bound.device)
    fn = plan.function(target.mode)
    acc_position = next(n for n, a in enumerate(plan.emitted.args) if a.param == "acc" and a.kind.value == "tensor")
    autotune.tune(kernel, plan.emitted, plan.key, fn, target, plan.grid, plan.positional, plan.keywords,
                  timer=record, disk=DiskCache(isolated_cache), force=True)
    assert len(seen) == len(configurations(plan.keywords["num_warps"], plan.keywords["num_stages"]))
    # The real launch afterwards sees the caller's accumulator once: acc + row sums, not 7 times over.
    want = args["acc"].numpy() + args["x"].numpy().sum(axis=1)
    targets.run(fn, target, plan.grid, plan.positional, plan.keywords)
    np.testing.assert_allclose(plan.positional[acc_position].numpy(), want, rtol=1e-5, atol=1e-5)


def test_workspaces_and_written_tensors_are_what_trials_copy():
    from tests.mutations import staged_copy

    kernel = staged_copy()  # a local buffer: a launcher workspace
    args = {"x": torch.arange(6, dtype=torch.float32), "out": torch.zeros(6)}
    plan = launcher.plan_launch(kernel, args, materialise=True)
    kinds = {n: (a.kind.value, a.param) for n, a in enumerate(plan.emitted.args)}
    copied = autotune.written_positions(kernel, plan.emitted.args, plan.positional)
    assert {kinds[n] for n in copied} == {("tensor", "out")} | {kinds[n] for n in kinds if kinds[n][0] == "workspace"}
    assert any(kinds[n][0] == "workspace" for n in copied)


def test_a_configuration_that_fails_is_skipped(isolated_cache):  # noqa: F811
    model = Config(4, 2)
    timer = CostTimer({Config(2, 2): 0.1}, fail=(Config(2, 2),))
    _, best, trials = _tune(_args(), timer, DiskCache(isolated_cache))
    assert Config(2, 2) not in [c for c, _ in trials]
    assert best != Config(2, 2) and len(trials) == len(timer.calls) - 1
    assert model in [c for c, _ in trials] or best is not None


def test_the_choice_is_remembered_in_memory_and_on_disk(isolated_cache):  # noqa: F811
    disk = DiskCache(isolated_cache)
    _, best, trials = _tune(_args(), CostTimer({Config(8, 3): 0.1}), disk)
    assert best == Config(8, 3) and trials
    again = CostTimer({})
    _, best2, trials2 = _tune(_args(), again, disk)
    assert (best2, trials2, again.calls) == (Config(8, 3), [], [])
    autotune.forget()  # a new process: the JSON record answers
    _, best3, trials3 = _tune(_args(), again, disk)
    assert (best3, trials3, again.calls) == (Config(8, 3), [], [])
    records = list(isolated_cache.rglob("autotune-*.json"))
    assert len(records) == 1 and b"pickle" not in records[0].read_bytes()


def test_other_shapes_are_tuned_on_their_own(isolated_cache):  # noqa: F811
    disk = DiskCache(isolated_cache)
    _tune(_args(5, 7), CostTimer({Config(8, 3): 0.1}), disk)
    timer = CostTimer({})
    plan, best, trials = _tune(_args(5, 700), timer, disk)  # another BLOCK_N: another specialisation
    assert len(trials) == len(timer.calls) == len(configurations(plan.keywords["num_warps"],
                                                                 plan.keywords["num_stages"]))
    assert len(list(isolated_cache.rglob("autotune-*.json"))) == 2


def test_the_interpreter_is_never_timed(isolated_cache):  # noqa: F811
    timer = CostTimer({})
    plan, best, trials = _tune(_args(), timer, DiskCache(isolated_cache), force=False)
    assert (best, trials, timer.calls) == (Config(plan.keywords["num_warps"], plan.keywords["num_stages"]), [], [])
    assert not list(isolated_cache.rglob("autotune-*.json"))


def test_an_autotuned_kernel_launches_like_any_other(isolated_cache, monkeypatch):  # noqa: F811
    monkeypatch.setenv(autotune.AUTOTUNE_ENV, "1")

    @intent.kernel
    def double(x: f32[N], out: Out[f32[N]]):
        out[:] = x * 2.0

    assert double.autotune
    x = torch.arange(10, dtype=torch.float32)
    for _ in range(2):  # the first launch plans (and on a GPU would tune); the second takes the plan
        out = torch.empty(10)
        double(x=x, out=out)
        assert torch.equal(out, x * 2)
    assert intent.kernel(autotune=False)(double.__wrapped__).autotune is False


def test_with_options_keeps_the_kernel_and_its_refinements():
    @intent.kernel(requires=[N <= 8], checks=True)
    def small(x: f32[N], out: Out[f32[N]]):
        out[:] = x + 1.0

    tuned = small.with_options(autotune=True)
    assert (tuned.autotune, tuned.checks, small.autotune) == (True, True, False)
    assert str(tuned.kir) == str(small.kir)
    with pytest.raises(Exception, match="N <= 8"):
        tuned(x=torch.zeros(9), out=torch.empty(9))
