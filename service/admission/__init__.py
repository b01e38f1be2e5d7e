"""Admission: who may ask the service for what. Tokens and roles (:mod:`~service.admission.auth`), the endpoints a spec
may name (:mod:`~service.admission.grants`), a submitted body checked and bounded (:mod:`~service.admission.intake`,
:mod:`~service.admission.spec_counts`), bounded requests and slots (:mod:`~service.admission.limits`), and per-owner
quotas (:mod:`~service.admission.quotas`) with the usage they are checked against (:mod:`~service.admission.disk_usage`,
:mod:`~service.admission.llm_usage`)."""

__all__: list[str] = []
