from venturi.models import NewJob
from venturi.store.postgres import PostgresStore


def test_enqueue_and_claim(store: PostgresStore) -> None:
    job_id = store.enqueue(NewJob("smoke", {"a": 1}))
    [job] = store.claim("w", {"smoke": 30}, 5)
    assert job.id == job_id
