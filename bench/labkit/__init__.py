"""The lab's machinery: build, run cells, aggregate results, render the report.

Experiments (bench/experiments/<name>.py) describe what to run and how to show it; this package does
the rest the same way for all of them.
"""
