"""The what-if panel's controls (gpuperf_magics.skins.panel_controls): starting values and their
bounds, the job-length rules, the offers to choose from and those chosen when it opens."""

from __future__ import annotations

import math

import pytest

from gpuperf_magics.skins.widgets import WhatIfPanel, what_if


# The what-if panel's two stores (conftest): real profiled CPU runs, imported T4 rows.
@pytest.fixture
def store(mlp_runs_store):
    return mlp_runs_store


@pytest.fixture
def imported(imported_t4_store):
    return imported_t4_store


def iterations(panel) -> int:
    """The job's iterations in the panel's answer (one row: the chosen configuration)."""
    assert len(panel.answer.frame) == 1
    return int(panel.answer.frame["iterations"].iloc[0])


def test_switching_to_iterations_keeps_the_job_and_then_follows_the_field(store):
    panel = what_if(store)
    assert iterations(panel) == 80
    panel.length.value = "iterations"
    assert iterations(panel) == 80
    assert panel.epochs.disabled and panel.samples.disabled and not panel.iterations.disabled
    panel.iterations.value = 1234
    assert iterations(panel) == 1_234
    panel.batch_size.value = 8  # the job stays 1,234 iterations long
    assert iterations(panel) == 1_234


def test_starting_values_open_the_panel_where_asked(store):
    panel = what_if(store, batch_sizes=[48], gpus=["T4"], epochs=3, samples=1000)
    assert panel.batch_size.value == 48
    assert panel.gpu.value == "Tesla T4"
    assert panel.epochs.value == 3 and panel.samples.value == 1000
    # 3 epochs × ceil(1000 / 48) = 21 iterations each.
    assert iterations(panel) == 63 and "transfer" in panel.text
    assert "note:" not in panel.text


def test_starting_iterations_open_the_panel_in_iterations(store):
    panel = WhatIfPanel(store, "mlp", iterations=500, batch_sizes=[8])
    assert panel.length.value == "iterations" and panel.iterations.value == 500
    assert iterations(panel) == 500


@pytest.mark.parametrize(("name", "value", "message"), [
    ("batch_size", 0, "finite number > 0"),
    ("batch_size", -8, "finite number > 0"),
    ("batch_size", 48.5, "whole number"),
    ("batch_size", True, "must be a whole number"),
    ("epochs", True, "must be a number"),
    ("batch_size", "48", "must be a number"),
    ("batch_size", 2_000_000, "between 1 and 1,000,000"),
    ("gpu_count", 0, "finite number > 0"),
    ("gpu_count", 4096, "between 1 and 1,024"),
    ("epochs", math.nan, "finite number > 0"),
    ("epochs", math.inf, "finite number > 0"),
    ("epochs", 0.001, "between 0.01 and 1,000,000"),
    ("iterations", -1, "finite number > 0"),
    ("samples", 0, "finite number > 0"),
    ("samples", 10**13, "between 1 and 1,000,000,000,000"),
])
def test_invalid_starting_values_are_refused(store, name, value, message):
    with pytest.raises(ValueError, match=message) as info:
        what_if(store, **({"batch_sizes": [value]} if name == "batch_size" else {name: value}))
    assert name in str(info.value)


def test_the_controls_hold_the_bounds_a_starting_value_is_checked_against(store):
    from gpuperf_magics.skins.panel_controls import _BOUNDS

    panel = what_if(store)
    for name in ("batch_size", "gpu_count", "epochs", "iterations", "samples"):
        control = getattr(panel, name)
        assert (control.min, control.max) == _BOUNDS[name], name
    assert (panel.deadline.min, panel.deadline.max) == (0, _BOUNDS["deadline_h"][1])  # 0: none


def test_whole_floats_are_accepted_as_whole_numbers(store):
    panel = what_if(store, batch_sizes=[16.0], samples=512.0)
    assert panel.batch_size.value == 16 and panel.samples.value == 512
    assert iterations(panel) == 320


def test_iterations_and_epochs_together_are_refused(store):
    with pytest.raises(ValueError, match=r"either iterations=N or epochs=E \(with samples"):
        what_if(store, iterations=100, epochs=2)


def test_spot_and_on_demand_rows_of_one_instance_are_separate_choices(imported):
    panel = what_if(imported, iterations=1000)
    choices = dict(panel.instances.options)
    ultra = {label: value for label, value in choices.items() if "a3-ultragpu-8g" in label}
    assert sorted(ultra.values()) == ["gcp a3-ultragpu-8g (us-central1, on-demand)",
                                      "gcp a3-ultragpu-8g (us-central1, spot)"]
    assert all(("spot" in label) == ("spot" in value) for label, value in ultra.items())
    assert choices["aws g5.xlarge (1× NVIDIA A10G, us-east-1, on-demand)"] == "g5.xlarge"
    panel.instances.value = ["gcp a3-ultragpu-8g (us-central1, spot)", "g5.xlarge"]
    frame = panel.offers.frame
    assert list(frame["offer"][1:]) == ["aws g5.xlarge (us-east-1, on-demand)",
                                        "gcp a3-ultragpu-8g (us-central1, spot)"]
    assert list(frame["pricing"][1:]) == ["on-demand", "spot"]


def test_a_users_own_offers_are_selected_when_the_panel_opens(imported, tmp_path):
    from gpuperf_magics.skins.panel_controls import DEFAULT_OFFERS

    path = tmp_path / "mine.csv"
    path.write_text("provider,region,instance,gpu,gpus,pricing,usd_per_hour,date,source\n"
                    "aws,us-east-1,g5.48xlarge,A10G,8,on-demand,9.0,2026-11-01,contract\n"
                    "acme,eu,t4-box,T4,1,on-demand,0.25,2026-11-01,quote\n")
    panel = what_if(imported, iterations=1000, prices=path)
    chosen = list(panel.instances.value)
    assert chosen[:2] == ["g5.48xlarge", "t4-box"]  # a replaced price and a new one
    assert len(chosen) == DEFAULT_OFFERS and chosen[2] == "g4dn.xlarge"


def test_labels_and_offer_names_have_room_to_show_whole(imported):
    from gpuperf_magics.skins.panel_controls import CHAR_PX

    panel = what_if(imported, iterations=1000)
    for control in (panel.network, panel.batch_size, panel.epochs, panel.samples,
                    panel.iterations, panel.gpu, panel.gpu_count, panel.deadline):
        room = float(control.style.description_width.removesuffix("px"))
        assert room >= CHAR_PX * len(control.description), control.description
        assert control.tooltip == control.description
    label_room = float(panel.instances.style.description_width.removesuffix("px"))
    options_room = float(panel.instances.layout.width.removesuffix("px")) - label_room
    longest = max(len(label) for label, _ in panel.instances.options)
    assert options_room >= CHAR_PX * longest
