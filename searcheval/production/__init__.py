"""Production data (issue 25): golden queries sampled from traces (`sampling`), relevance from
clicks through position-debiased click models (`clicks`, `implicit`), the live monitor over the
recent traces with its change detector (`monitor`), and a traffic simulator with a known
relevance and position bias (`simulate`) for the proofs and the benchmark."""
