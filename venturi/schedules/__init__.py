"""Periodic jobs: schedules (a cron expression or a fixed interval), what to do about
missed slots, the worker's scheduler that fires them, and the retention that prunes
finished jobs on a schedule of its own."""
