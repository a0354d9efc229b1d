"""The judgment loop: judgments with provenance and the effective-grade rule (`judgments`),
reading and writing judgment files (`files`), the versions of an engine's own documents its
lookup reported and the staleness they tell (`versions`), pools of unjudged results (`pool`),
agreement between judges (`agreement`), what a run's judgments say in its report (`summary`), the
rating page (`app`, FastAPI; imported only by `searcheval rate`), and model judges: judges as data
(`judges`), what a judge answers per kind (`grading`), labelling a pool with one (`labelling`),
its human audit (`audit`) and the rule that says which label sources count (`counting`)."""
