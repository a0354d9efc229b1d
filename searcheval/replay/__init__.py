"""Replay: recorded production traces scored without re-running search (`scoring`), the one
composition the CLI and the flow's tasks share (`compose`), and publishing a replay (`report`)."""
