"""Prefect flows that run the DVC stage graph: ``reproduce`` (the paper's Table 1 as
one flow). They go through DVC and never re-encode stage order
(docs/architecture.md, "Stages, DVC, Prefect and MLflow")."""
