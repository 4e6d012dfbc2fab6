"""What the test modules share besides conftest.py's fixtures: plain helpers, fakes and constants,
one module per subject. A test module imports from here (or conftest), never from another test
module, and a helper is defined once (tests/test_suite_shape.py)."""
