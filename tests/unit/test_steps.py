import pytest

from workspace.setup.steps import SetupError, run_logged, step


def test_a_failed_command_is_one_sentence_with_the_log(tmp_path):
    log = tmp_path / "logs" / "build.log"
    with pytest.raises(SetupError) as err:
        run_logged(["bash", "-c", "echo detail for the log; exit 3"], log, "Building the thing failed")
    assert str(err.value) == f"Building the thing failed (exit status 3). Read {log} for the details."
    assert "detail for the log" in log.read_text()


def test_a_missing_program_says_so(tmp_path):
    with pytest.raises(SetupError) as err:
        run_logged(["no-such-program-here"], tmp_path / "x.log", "Running it failed")
    assert "no-such-program-here is not installed" in str(err.value)


def test_steps_print_their_duration(capsys):
    with step("images", "copy files"):
        pass
    assert capsys.readouterr().out.startswith("[images] copy files ... 0.0 s")
    with pytest.raises(SetupError):
        with step("images", "import"):
            raise SetupError("Importing failed.")
    assert "[images] import ... failed after" in capsys.readouterr().out
