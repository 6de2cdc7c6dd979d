"""`python -m runner.report.export_schemas` rewrites runner/report/schemas/*.schema.json."""

from runner.report._schemas import export_schemas

if __name__ == "__main__":
    for path in export_schemas():
        print(path)
