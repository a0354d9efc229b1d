"""`searcheval ui`: the server's environment tells the UI the port its API is on, streams logs out
for `--watch`, keeps telemetry off, and leaves what the user set alone. (tests/deploy starts the
real server with it on a free port and drives its UI in Chromium.)"""

from searcheval.cli import main, quiet_defaults
from searcheval.cli.ui import ui_environment


def test_a_non_default_port_is_the_one_the_ui_calls():
    env = ui_environment("127.0.0.1", 4321, {})
    assert env["PREFECT_UI_API_URL"] == "http://127.0.0.1:4321/api"
    assert env["PREFECT_UI_URL"] == "http://127.0.0.1:4321"
    assert env["PREFECT_SERVER_ANALYTICS_ENABLED"] == "false"
    assert env["PREFECT_SERVER_LOGS_STREAM_OUT_ENABLED"] == "true"
    assert env["PREFECT_SERVER_LOGS_STREAM_PUBLISHING_ENABLED"] == "true"


def test_listening_on_every_address_points_the_ui_at_loopback():
    assert ui_environment("0.0.0.0", 80, {})["PREFECT_UI_API_URL"] == "http://127.0.0.1:80/api"


def test_what_the_user_set_wins():
    mine = {"PREFECT_UI_API_URL": "https://search.example.org/prefect/api",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "true", "OTHER": "kept"}
    env = ui_environment("127.0.0.1", 4321, mine)
    assert env["PREFECT_UI_API_URL"] == "https://search.example.org/prefect/api"
    assert env["PREFECT_SERVER_ANALYTICS_ENABLED"] == "true" and env["OTHER"] == "kept"
    assert mine == {"PREFECT_UI_API_URL": "https://search.example.org/prefect/api",
                    "PREFECT_SERVER_ANALYTICS_ENABLED": "true", "OTHER": "kept"}  # not modified


def test_the_cli_turns_prefect_telemetry_off_unless_the_user_turned_it_on():
    env: dict[str, str] = {}
    quiet_defaults(env)
    assert env == {"PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                   "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "60"}
    env = {"PREFECT_SERVER_ANALYTICS_ENABLED": "true",
           "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "5"}
    quiet_defaults(env)
    assert env == {"PREFECT_SERVER_ANALYTICS_ENABLED": "true",
                   "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "5"}


def test_ui_has_a_help_text_and_refuses_a_bad_port(capsys):
    try:
        main(["ui", "--port", "x"])
    except SystemExit as exc:
        assert exc.code == 2
    assert capsys.readouterr().err.startswith("searcheval: argument --port: invalid int value")
