package dev.durable.spring.compat;

import dev.durable.JobDefinition;
import io.micrometer.core.instrument.MeterRegistry;
import io.r2dbc.spi.ConnectionFactory;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.r2dbc.connection.R2dbcTransactionManager;
import org.springframework.r2dbc.core.DatabaseClient;
import org.springframework.transaction.ReactiveTransactionManager;
import org.springframework.transaction.annotation.EnableTransactionManagement;
import org.springframework.transaction.reactive.TransactionalOperator;
import reactor.core.publisher.Mono;

/**
 * The application of a WebFlux team's first hour: the Spring Boot guide's beans, a mail job and a shipping
 * job, on Spring Boot's auto-configuration (whichever Boot line is on the classpath).
 */
@SpringBootConfiguration
@EnableAutoConfiguration
@EnableTransactionManagement
@Import({MailJobs.class, Signups.class, Tuning.class, Orders.class})
public class FirstHourApp {

    /** Meters a registry refused (Prometheus refuses one name with two sets of tag keys). */
    static final List<String> REFUSED_METERS = new CopyOnWriteArrayList<>();

    @Bean
    Mailer mailer() {
        return new Mailer();
    }

    @Bean
    JobDefinition<String, String> ship() {
        return JobDefinition.of("ship", String.class, (String order) -> Mono.just("shipped " + order)).queue("outbox");
    }

    // With spring-boot-starter-data-r2dbc these three come from Boot; declared here so the test
    // needs nothing of one Boot line.
    @Bean
    DatabaseClient databaseClient(ConnectionFactory connectionFactory) {
        return DatabaseClient.create(connectionFactory);
    }

    @Bean
    ReactiveTransactionManager transactionManager(ConnectionFactory connectionFactory) {
        return new R2dbcTransactionManager(connectionFactory);
    }

    @Bean
    TransactionalOperator transactionalOperator(ReactiveTransactionManager transactionManager) {
        return TransactionalOperator.create(transactionManager);
    }

    @Bean
    static BeanPostProcessor refusedMeters() {
        return new BeanPostProcessor() {
            @Override
            public Object postProcessAfterInitialization(Object bean, String beanName) {
                if (bean instanceof MeterRegistry registry) {
                    registry.config().onMeterRegistrationFailed((id, reason) -> REFUSED_METERS.add(id + ": " + reason));
                }
                return bean;
            }
        };
    }
}
