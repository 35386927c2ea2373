"""The laws: what must always hold, one module per law. Each module's docstring states the
law and the observables it needs; it ends with the law's one declaration, `LAW = Law(...)`
(declaration.py): property or check, strategy, pytest entries, explicit examples, negative
controls. index.py finds the declarations; pytest, `python -m harness check`, the zoo and
the docs index (docs/laws.md) read nothing else. A failing check raises OracleFailure
(common.py) naming the law, the check and the first violation.

Modules here without a declaration serve the laws: common.py, declaration.py, index.py,
engine_support.py (what the black-box laws share), liveness.py (a served engine commits
tokens until its requests finish, checked inside other laws). docs/adding-a-law.md walks
through adding one."""
