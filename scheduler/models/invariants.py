"""Trigger bodies shared by the models' invariant triggers (django-pgtrigger)."""


def refuse(message: str) -> str:
    """PL/pgSQL body that refuses the write with an integrity error; `message` is a RAISE format and its arguments."""
    return f"RAISE EXCEPTION {message} USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;"
