"""The JSON API for scripts (/api/v1/): submit a job, follow it, fetch its result.

Not a Django app of its own: views over the jobs app's rows and form.
"""
