"""Sweeps (#31): their parameters parsed, the commands expanded (shell-quoted values), a log's last line,
and the archive's folder names; pure logic."""

import shlex

import pytest

from workspace import sweeps, tasks
from workspace.errors import UserError
from workspace.outputs.sweep_archive import folder


def test_the_cli_and_the_api_say_the_same_parameters():
    from_cli = sweeps.parse_params(["lr=0.1,0.01,0.001", "seed=1,2"])
    from_api = sweeps.parse_params({"lr": ["0.1", 0.01, "0.001"], "seed": [1, 2]})
    from_page = sweeps.parse_params("lr=0.1, 0.01,0.001\n\nseed=1,2\n")
    assert from_cli == from_api == from_page == [("lr", ["0.1", "0.01", "0.001"]), ("seed", ["1", "2"])]
    assert sweeps.size(from_cli) == 6


def test_one_run_per_combination_the_last_parameter_fastest_and_values_quoted():
    params = sweeps.parse_params({"lr": ["0.1", "0.01"], "name": ["a b", "x;rm -rf ~"]})
    runs = sweeps.expand("python train.py --lr {lr} --name {name} ${HOME} {other}", params)
    assert [r[0] for r in runs] == [
        {"lr": "0.1", "name": "a b"},
        {"lr": "0.1", "name": "x;rm -rf ~"},
        {"lr": "0.01", "name": "a b"},
        {"lr": "0.01", "name": "x;rm -rf ~"},
    ]
    # each value one argument of the shell, whatever it holds; braces that name no parameter stay
    assert shlex.split(runs[1][1]) == [
        "python",
        "train.py",
        "--lr",
        "0.1",
        "--name",
        "x;rm -rf ~",
        "${HOME}",
        "{other}",
    ]


@pytest.mark.parametrize(
    "given, says",
    [
        (None, "needs its parameters"),
        ({}, "at least one parameter"),
        (["lr"], "name=value"),
        ({"1lr": ["1"]}, "letters, digits"),
        ({"lr": []}, "needs a list of values"),
        ({"lr": ["1", "1"]}, "a value twice"),
        ({"lr": [True]}, "text or numbers"),
        ({"lr": ["a\nb"]}, "one line"),
        ({"lr": ["x" * 300]}, "one line of 1 to 256"),
        ({f"p{i}": ["1"] for i in range(9)}, "at most 8 parameters"),
        ({"lr": [str(i) for i in range(101)]}, "at most 100 are allowed"),
        (["lr=1", "lr=2"], "given twice"),
    ],
)
def test_bad_parameters_are_the_users_400(given, says):
    with pytest.raises(UserError) as e:
        sweeps.parse_params(given)
    assert e.value.status_code == 400 and says in e.value.message


def test_a_parameter_the_command_never_uses_and_too_many_runs_are_refused():
    params = sweeps.parse_params({"lr": ["1", "2"], "seed": ["1", "2", "3"]})
    with pytest.raises(UserError) as e:
        sweeps.expand("python train.py --lr {lr} --seed {sed}", params)
    assert "never uses the sweep parameter “seed”: put {seed} where its value goes" in e.value.message
    with pytest.raises(UserError) as e:
        sweeps.expand("python train.py {lr} {seed}", params, max_runs=5)
    assert "would make 6 runs; at most 5" in e.value.message
    assert len(sweeps.expand("python train.py {lr} {seed}", params, max_runs=0)) == 6  # 0: no site bound


def test_the_last_line_of_a_log_is_the_commands_not_the_runners():
    log = (
        b"2026-12-06T10:00:00.000000001Z epoch 1 loss 0.9\n"
        b"2026-12-06T10:00:01.000000001Z epoch 2 loss 0.5\n"
        b"2026-12-06T10:00:01.500000000Z \n"
        b"2026-12-06T10:00:02.000000001Z [workspace-task] exit=0 wrote=40 seconds=2.0\n"
    )
    assert tasks.last_line([log[:50], log[50:]]) == "epoch 2 loss 0.5"
    assert tasks.last_line([b"2026-12-06T10:00:00Z " + b"y" * 500 + b"\n"]) == "y" * 199 + "…"
    assert tasks.last_line([]) is None


def test_an_archives_folder_names_its_run_and_nothing_else():
    view = sweeps.RunView(3, {"lr": "0.1", "name": "../x y"}, "run-0", "", state="queued")
    assert folder(view) == "03_lr=0.1_name=.._x_y"
    assert "/" not in folder(view)
