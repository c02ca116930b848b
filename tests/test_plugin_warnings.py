"""kafka-python's own deprecation warnings are not the user's to read: a project that loads the plugin sees
none of them, and its own warnings as before."""

import pytest


def test_a_project_that_loads_the_plugin_sees_no_kafka_python_warnings(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import warnings

        def test_nothing_to_see():
            pass

        def test_its_own_warning_still_shows():
            warnings.warn("this API is deprecated", DeprecationWarning)
        """
    )
    # a fresh interpreter: the plugin and kafka-python are imported as in a user's run
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, warnings=1)
    output = result.stdout.str()
    assert "read_text is deprecated" not in output and "open_text is deprecated" not in output
    assert "this API is deprecated" in output
