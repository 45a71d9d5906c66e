"""The price table: the built-in rows and a user's own file merged over them."""

from __future__ import annotations

import datetime

import pandas as pd
import pytest

from gpuperf_magics.hardware.prices import COLUMNS, PriceError, prices

HEADER = "provider,region,instance,gpu,gpus,pricing,usd_per_hour,date,source\n"


def test_builtin_rows_are_complete_and_name_catalog_gpus():
    table = prices()
    assert list(table.columns) == list(COLUMNS) and len(table) >= 5
    assert (table["usd_per_hour"] > 0).all() and (table["gpus"] >= 1).all()
    assert table["source"].str.startswith("https://").all()
    assert all(isinstance(d, datetime.date) for d in table["date"])
    g5 = table[table["instance"] == "g5.xlarge"].iloc[0]
    assert g5["gpu"] == "NVIDIA A10G" and g5["usd_per_hour"] == pytest.approx(1.006)


def test_builtin_rows_cover_the_common_instances_with_their_gpus():
    table = prices()
    by_key = {(r.provider, r.instance, r.pricing): r for r in table.itertuples()}
    expected = {  # (provider, instance): (catalog GPU, GPUs per instance)
        ("aws", "g4dn.xlarge"): ("Tesla T4", 1), ("aws", "g4dn.12xlarge"): ("Tesla T4", 4),
        ("aws", "g5.xlarge"): ("NVIDIA A10G", 1), ("aws", "g5.48xlarge"): ("NVIDIA A10G", 8),
        ("aws", "g6.xlarge"): ("NVIDIA L4", 1), ("aws", "g6e.xlarge"): ("NVIDIA L40S", 1),
        ("aws", "p3.2xlarge"): ("Tesla V100-SXM2-16GB", 1),
        ("aws", "p3.16xlarge"): ("Tesla V100-SXM2-16GB", 8),
        ("aws", "p4d.24xlarge"): ("NVIDIA A100-SXM4-40GB", 8),
        ("aws", "p4de.24xlarge"): ("NVIDIA A100-SXM4-80GB", 8),
        ("aws", "p5.48xlarge"): ("NVIDIA H100 80GB HBM3", 8),
        ("aws", "p5en.48xlarge"): ("NVIDIA H200", 8),
        ("azure", "Standard_NC24ads_A100_v4"): ("NVIDIA A100 80GB PCIe", 1),
        ("azure", "Standard_NC40ads_H100_v5"): ("NVIDIA H100 NVL", 1),
        ("lambda", "gpu_1x_a100_sxm4"): ("NVIDIA A100-SXM4-40GB", 1),
    }
    for (provider, instance), (gpu, count) in expected.items():
        row = by_key[(provider, instance, "on-demand")]
        assert (row.gpu, row.gpus) == (gpu, count), instance
    # GPUs per instance follow AWS's sizes: 12xlarge = 4, 48xlarge = 8 for g4dn/g5/g6/g6e.
    aws = table[(table["provider"] == "aws") & table["instance"].str.match(r"g(4dn|5|6e?)\.")]
    sizes = {"xlarge": 1, "12xlarge": 4, "48xlarge": 8, "metal": 8}
    assert (aws["instance"].str.split(".").str[1].map(sizes) == aws["gpus"]).all()
    assert {"aws", "azure", "gcp", "lambda"} <= set(table["provider"])
    assert "spot" in set(table["pricing"])


def test_builtin_prices_are_dated_sourced_current_and_each_gpu_is_in_the_catalog():
    from gpuperf_magics.hardware.catalog import gpus

    table = prices()
    read = datetime.date(2026, 12, 1)  # when the file was last read against its sources
    assert all(read - datetime.timedelta(days=366) <= d <= read for d in table["date"])
    assert set(table["gpu"]) <= set(gpus()["name"])
    assert not (table["pricing"] == "capacity-block").any()  # expired reservation rates gone
    # The source is a page at a fixed version where it has one (a commit, a dated snapshot).
    github = table[table["source"].str.startswith("https://github.com/")]
    assert github["source"].str.contains(r"/blob/[0-9a-f]{40}/").all()
    # The panel preselects the first ten rows: common single-GPU offers, one GPU count.
    assert (table["gpus"].iloc[:10] == 1).all()


def test_a_user_file_adds_rows_and_replaces_builtin_ones_in_place(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("# my negotiated prices\n" + HEADER
                    + "aws,us-east-1,g5.xlarge,A10G,1,on-demand,0.5,2026-11-30,contract\n"
                    + "acme,eu,box-4,t4,4,spot,1.2,2026-11-30,quote\n")
    builtin = prices()
    table = prices(path)
    assert len(table) == len(builtin) + 1
    position = builtin.index[builtin["instance"] == "g5.xlarge"][0]
    assert table.loc[position, "usd_per_hour"] == 0.5
    assert table.loc[position, "source"] == "contract"
    last = table.iloc[-1]
    assert (last["instance"], last["gpu"], last["gpus"]) == ("box-4", "Tesla T4", 4)
    assert last["note"] == ""


def test_a_dataframe_works_as_a_price_file():
    frame = pd.DataFrame([{"provider": "acme", "region": "eu", "instance": "x1", "gpu": "L4",
                           "gpus": 1, "pricing": "on-demand", "usd_per_hour": 0.7,
                           "date": "2026-11-01", "source": "quote"}])
    assert prices(frame).iloc[-1]["gpu"] == "NVIDIA L4"


@pytest.mark.parametrize(("row", "message"), [
    ("acme,eu,x,Voodoo 5,1,spot,1,2026-01-01,q", "row 1: unknown GPU"),
    ("acme,eu,x,T4,0,spot,1,2026-01-01,q", "row 1: gpus must be a whole number >= 1"),
    ("acme,eu,x,T4,1.5,spot,1,2026-01-01,q", "gpus must be a whole number"),
    ("acme,eu,x,T4,1,spot,-2,2026-01-01,q", "usd_per_hour must be a finite number > 0"),
    ("acme,eu,x,T4,1,spot,nan,2026-01-01,q", "usd_per_hour must be a finite number > 0"),
    ("acme,eu,x,T4,1,reserved,1,2026-01-01,q", "pricing must be one of"),
    ("acme,eu,x,T4,1,spot,1,yesterday,q", "date must be an ISO date"),
    ("acme,eu,,T4,1,spot,1,2026-01-01,q", "instance is empty"),
])
def test_bad_rows_are_refused_with_file_row_and_column(tmp_path, row, message):
    path = tmp_path / "bad.csv"
    path.write_text(HEADER + row + "\n")
    with pytest.raises(PriceError, match=message) as info:
        prices(path)
    assert str(path) in str(info.value)


def test_missing_columns_duplicates_and_missing_files_are_refused(tmp_path):
    path = tmp_path / "short.csv"
    path.write_text("provider,instance,usd_per_hour\naws,x,1\n")
    with pytest.raises(PriceError, match=r"missing column.*region"):
        prices(path)
    path.write_text(HEADER + "a,eu,x,T4,1,spot,1,2026-01-01,q\n" * 2)
    with pytest.raises(PriceError, match="listed more than once"):
        prices(path)
    with pytest.raises(PriceError, match="does not exist"):
        prices(tmp_path / "nowhere.csv")
