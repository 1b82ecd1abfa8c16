def healthz(request):
    raise NotImplementedError
