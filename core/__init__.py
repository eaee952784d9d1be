"""The platform every app stands on: component health, the runtime, periodic jobs, push
group names and the fixed-point number format. It imports no app."""
