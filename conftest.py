"""pytest's root: every test folder (tests/, provingground/tests/) gets the cluster fixtures.

``pytest_plugins`` is allowed only in the root conftest, hence this file.
"""

pytest_plugins = ["provingground.pytest_plugin"]
