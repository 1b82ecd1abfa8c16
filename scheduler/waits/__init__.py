"""Durable waits (WAIT-1..7): a play sleeps or waits for an event with its sandbox released, and resumes."""
