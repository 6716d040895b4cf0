"""The HTTP server of `vanilla-transformer serve`: LibreTranslate's API and our own over the models of `deploy.engines`.

- `app`: `create_app` (the FastAPI application: its state, routes, error handlers, middleware, lifespan).
- `state`: `ServerState`, what the routes share, and `Server`, the parameter (a FastAPI dependency) they read it by.
- `libretranslate`: LibreTranslate's routes (`/translate`, `/detect`, `/languages`, `/translate_file`, `/health`, ...)
  and its request fields (JSON or forms, charsets); `v1`: ours (`/v1/translate`, `/v1/ner`, `/v1/health`, `/metrics`).
- `dispatch`: from a request's sentences to the engines, for both APIs: limits, deadline, body size, client address,
  API keys, readiness (`readiness`, both health routes'), blank texts skipped, a translation's route (a pivot).
- `batcher`: the dynamic batcher, sentences of concurrent requests in engine batches.
- `languages`: the served pairs, their routes, language names and detection; `markup`: the sentences of a text or an
  HTML document and their translations put back; `documents`: .docx, .pptx, .odt, .odp, .epub and .srt files;
  `pdf`: .pdf files (the `pdf` extra).
- `access`: API keys and request limits (memory or Redis); `downloads`: translated files until their download.
- `openapi`: the OpenAPI document (`/spec`, `/docs`); `prometheus`: the metrics; `errors`: `ServeError`.
- `settings`: the server's limits and switches (`Settings`); `web_page.html`: the translation page at `/`.
"""
