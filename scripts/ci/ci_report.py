"""The ending the CI check scripts share (check_wheel, check_workflows, check_kernel_resources)."""


def finish(what, errors, passed_detail=""):
    """Print the errors under one FAILED line and return 1, or print a passed line and return 0."""
    if errors:
        print(f"{what} FAILED:\n  " + "\n  ".join(errors))
        return 1
    print(f"{what} passed{passed_detail}")
    return 0
