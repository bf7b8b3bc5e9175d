"""Music and video jobs: free quotes, the paid queue (``Media``), and job handles
(``AsyncJob``) that poll inline."""

from x402lab.media.job import AsyncJob, Job
from x402lab.media.quotes import MediaQuote
from x402lab.media.resource import Media

__all__ = ["AsyncJob", "Job", "Media", "MediaQuote"]
