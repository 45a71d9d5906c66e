"""A profiled block inside another is ignored with a word, not profiled twice (issue 19).
Real training on tiny CPU models, real SQLite stores, a real IPython shell."""

from __future__ import annotations

import pytest
import torch
from tiny_models import mlp_one_hidden_layer as mlp
from tiny_models import train

import gpuperf_magics as gm
from gpuperf_magics.capture.nesting import NOTE, NestedProfileWarning


def test_an_inner_block_is_ignored_and_the_outer_counts_each_step_once(tmp_path):
    store = tmp_path / "runs.sqlite"
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gm.profile_training(name="outer", store=store) as outer:
        train(model, opt, steps=3)
        with (pytest.warns(NestedProfileWarning, match="inside another") as caught,
              gm.profile_training(name="inner", store=store) as inner):
            train(model, opt, steps=4)
        train(model, opt, steps=2)
    assert caught[0].filename == __file__  # it points at the inner with line
    assert len(outer.iterations) == 9 and outer.run_id is not None
    assert inner.iterations == [] and inner.run_id is None and NOTE in inner.notes
    runs = gm.Store(store).runs()
    assert list(runs["network"]) == ["outer"]  # saved once, not twice
    # Blocks after it profile again: the outer one left no mark.
    with gm.profile_training(name="after", store=store) as after:
        train(model, opt, steps=3)
    assert len(after.iterations) == 3


def test_a_nested_cell_says_why_it_has_no_run(ip, capsys, _isolated_store):
    ip.user_ns.update(mlp=mlp, train=train, torch=torch)
    ip.run_cell("m = mlp(); o = torch.optim.SGD(m.parameters(), lr=0.01)")
    inner = "%%profile_training -n inner\ntrain(m, o, steps=4)\n"
    ip.user_ns["inner_cell"] = inner
    ip.run_cell_magic("profile_training", "-n outer",
                      "train(m, o, steps=2)\nget_ipython().run_cell(inner_cell)\n")
    out = capsys.readouterr().out
    assert "profile_training: not profiled on its own" in out
    assert "profile_training: outer · 6 it" in out
    assert list(gm.Store(_isolated_store).runs()["network"]) == ["outer"]
