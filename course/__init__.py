"""The course's maintainer tools: one package, one command line (``python -m course <command>``).

CONTRIBUTING.md ("Where things live") says what each module does. Importing the package does nothing;
each command imports only what it needs.
"""
