"""Options and plugins for the whole test tree."""

pytest_plugins = ["tests.cluster_fixtures"]


def pytest_addoption(parser):
    parser.addoption(
        "--kubeconfig",
        default=None,
        help="run e2e tests against this cluster instead of starting the proving ground "
        "(KUBECONFIG works too)",
    )
