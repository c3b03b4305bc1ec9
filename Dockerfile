# One image holds the four binaries, and healthcheck for the containers'
# health checks (the image has no shell and no curl); docker-compose.yml
# picks one per service.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -o /out/ ./cmd/api ./cmd/worker ./cmd/healthcheck ./tools/cmd/fakeprocessor ./tools/cmd/demoreceiver

FROM gcr.io/distroless/static-debian12
COPY --from=build /out/ /usr/local/bin/
USER nonroot
