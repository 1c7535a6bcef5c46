"""The course's maintainer tools: one package, one command line (``python -m course <command>``).

Modules, by job (CONTRIBUTING.md, "Where things live", has the whole table):

- ``layout``: where every folder and configuration file is, and what _config.yml and pyproject.toml say;
- ``notebook_file``: the one reader of ``.ipynb`` files; ``chapters``: sync, execute and check lessons/;
- ``myst``, ``lesson``: a chapter's MyST read once, into records; ``book_index``: what a ``{ref}`` can
  point at; ``plain_markdown``, ``solution_code``: the conversion; ``launch_notebooks``,
  ``student_edition``, ``graded_edition``: the editions learners and graders get;
- ``grade``, ``sandbox``: grading submissions; ``release``, ``vendor_js``, ``train``, ``colour_maps``,
  ``bench``: the rest of a maintainer's work;
- ``launch_buttons``: a Sphinx extension of the book (its launch buttons); ``cli``: the command line.

Importing the package does nothing; each command imports only what it needs.
"""
